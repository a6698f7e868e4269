"""The checker's side of the call channel: the candidate's inputs written, its calls made and timed,
its outputs copied out of the runner's memory, all from this (trusted) process.

One call on a GPU (`RunnerLink.call`): the call's message goes to the runner first, then this
process enqueues on its stream:

    wait gate >= n        the runner is at this call (it wrote `gate` on its stream)
    flush L2              a read of twice the L2 (`timing.L2Flush`)
    write the inputs      copies of this call's pristine inputs into the shared buffers
    event start           the clock starts: nothing of the call could run before its inputs existed
    write go = n          the runner's stream may run forward
    wait done >= n        the runner's stream wrote `done` after forward
    event end             the clock stops
    copy the outputs      where the last call's outputs were (`Exports` places): read at `done`

When the reply names outputs elsewhere than predicted (the first call, an allocation that moved),
they are copied when the reply arrives and the clock stops there instead (later, so never in the
candidate's favour). The message goes first because launching a kernel may synchronize the
launching process's context (CUDA loads modules lazily): a checker that enqueued `wait gate` and
then launched its first L2 flush before telling the runner to start would wait for a `gate` the
runner never heard to write. Sent first, every wait of either stream depends only on work already
enqueued by the other side. Work the runner leaves running past `done` (another stream, a thread) is not
in the copies: such a call's outputs are wrong. The clock is this process's CUDA events on its own
stream; the runner's work lies between them because the flag words order the two streams. This
needs the two processes to share the GPU without context switches (a private MPS server,
`judge.mps`): otherwise every call pays ~0.3 ms of switching (docs/benchmarks.md) and the runner
times itself (`self_time`), which the verdict says.

On a CPU the inputs are written into the shared arena before the call and the call is timed by
the wall clock around its request and reply.
"""
from __future__ import annotations

import os
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import cudaipc, memops, protocol
from ..faults import async_fault

REPLY_POLL_S = 0.002


class RunnerGone(Exception):
    """The runner process died, or broke the protocol; `message` says how, for the verdict."""


@dataclass
class CallResult:
    """One call as the checker saw it."""

    n: int
    outputs: list = field(default_factory=list)  # the checker's own copies (snapshots)
    grads: dict[str, Any] = field(default_factory=dict)  # backward problems: gradient by name
    error: str | None = None
    error_type: str = ""
    ms: float | None = None  # the call's time (the clock's method in `RunnerLink.clock`)
    types: list[str] = field(default_factory=list)  # the runner's types of its outputs
    late: bool = False  # outputs copied when the reply came (not at `done`)


def shared_fault(exc: BaseException) -> str:
    """The candidate's CUDA fault as this process saw it ('' when `exc` is none): the runner and
    this process are clients of one MPS server, and a client's illegal access or device assert ends
    every client's context, so this process's next CUDA call during the candidate's call raises the
    candidate's fault. It is the candidate's error (a trial fails), never the judge's; no CUDA work
    of this process can follow (`RunnerLink.faulted`)."""
    what = async_fault(f"{type(exc).__name__}: {exc}")
    if not what:
        return ""
    return (f"CUDA error: {what} (raised in the judge's process, which shares the GPU's MPS server with "
            f"the candidate's: a fault in the candidate's kernels ends both; {type(exc).__name__}: {exc})")


class RunnerLink:
    """The call channel to one runner (see the module docstring)."""

    def __init__(self, sock: socket.socket, device: str, *, self_time: bool = False, timeout_s: float = 300.0,
                 runner_pid: int = 0, on_device: bool | None = None):
        self.sock, self.device, self.timeout_s, self.runner_pid = sock, device, timeout_s, runner_pid
        self.gpu = str(device).startswith("cuda") if on_device is None else on_device
        self.self_time = self_time and self.gpu
        self.clock = ("runner_events" if self.self_time else "checker_events") if self.gpu else "wall_cpu"
        self.n = 0
        self.held: int | None = None  # device memory the runner still held after a `trim`
        self.faulted = False  # a CUDA fault during a call ended this process's context too (`shared_fault`)
        self.shared: list = []  # the shared input buffers (and values), in argument order
        self.shared_grads: list = []
        self.layout: list[tuple] = []
        self.exports = protocol.Exports()
        self.imports = None
        self.arena = None
        self.flags = None
        self.flush = None
        self.prediction: list[dict] | None = None  # the last call's output descriptors
        self.snaps: list = []
        self.rng = random.SystemRandom()

    # ------------------------------------------------------------------ requests

    def request(self, header: dict[str, Any], payloads: list[bytes] | None = None, fds: list[int] | None = None,
                timeout: float | None = None) -> protocol.Frame:
        self.send(header, payloads, fds)
        return self.reply(timeout)

    def send(self, header: dict[str, Any], payloads: list[bytes] | None = None, fds: list[int] | None = None) -> None:
        try:
            protocol.send(self.sock, header, payloads, fds)
        except (protocol.ChannelError, OSError) as exc:
            raise RunnerGone(f"the candidate's process stopped answering ({exc})") from exc

    def reply(self, timeout: float | None = None) -> protocol.Frame:
        try:
            reply = protocol.receive(self.sock, timeout=timeout or self.timeout_s, max_payload=protocol.MAX_PAYLOAD)
        except (protocol.ChannelError, OSError) as exc:
            raise RunnerGone(f"the candidate's process stopped answering ({exc})") from exc
        for fd in reply.fds:  # the runner has no business sending descriptors
            os.close(fd)
        if reply.header.get("internal"):
            raise RunnerGone(str(reply.header.get("error")))
        return reply

    def load(self, timeout: float | None = None, **fields: Any) -> dict[str, Any]:
        return self.request({"op": protocol.LOAD, "self_time": self.self_time, **fields}, timeout=timeout).header

    def build(self) -> dict[str, Any]:
        return self.request({"op": protocol.BUILD}).header

    def report(self) -> dict[str, Any]:
        return dict(self.request({"op": protocol.REPORT}).header.get("report") or {})

    def finish(self) -> dict[str, Any]:
        return dict(self.request({"op": protocol.FINISH}, timeout=60).header.get("report") or {})

    def burst(self, ms: float) -> dict[str, Any]:
        return self.request({"op": protocol.BURST, "ms": ms}).header

    def trim(self) -> dict[str, Any]:
        """The runner's cached device memory given back (`Session.trim`); its reply."""
        return self.request({"op": protocol.TRIM}, timeout=60).header

    def with_room(self, step):
        """`step()`, one of this process's own device allocations beside the runner (copying a call's
        outputs, making inputs, comparing); when it runs out of device memory, the runner gives back
        the blocks its allocator caches (a forward's freed workspace: a candidate using most of the
        GPU inside forward left no room to copy its outputs, H200 2026-11-28), so does this process,
        and `step` runs once more; a second shortage is raised (`self.held`: what the runner still
        holds, in bytes)."""
        try:
            return step()
        except torch.OutOfMemoryError:
            if not self.gpu:
                raise
        reply = self.trim()
        self.held = reply.get("held") if isinstance(reply.get("held"), int) else None
        torch.cuda.empty_cache()
        return step()

    # ------------------------------------------------------------------ the shared inputs

    def share(self, args: list, grad_outputs: list | None = None, poison: list[int] | None = None) -> None:
        """Make shared buffers shaped like `args` (and output gradients) and send them to the runner;
        again only when a call's inputs are shaped otherwise."""
        grad_outputs = grad_outputs or []
        layout = _layout(args) + [("grad",)] + _layout(grad_outputs)
        if layout == self.layout:
            return
        tensors = [t for t in list(args) + list(grad_outputs) if isinstance(t, torch.Tensor)]
        host = [t for t in tensors if t.device.type == "cpu"]
        payloads: list[bytes] = []
        fds: list[int] = []
        self.arena = None
        offsets: dict[int, int] = {}
        if host:
            size, places = protocol.Arena.layout(host)
            self.arena = protocol.Arena(size)
            offsets = {id(t): place for t, place in zip(host, places, strict=True)}
            fds = [self.arena.fd]
        buffers = [self._buffer(a, offsets) for a in args]
        grads = [None if g is None else self._buffer(g, offsets) for g in grad_outputs]
        header: dict[str, Any] = {"op": protocol.INPUTS, "poison": list(poison or [])}
        header["args"] = [self._describe(b, payloads, offsets) for b in buffers]
        header["grad_outputs"] = [None if g is None else self._describe(g, payloads, offsets) for g in grads]
        if self.gpu:
            self._flag_words()
            header["flags"] = self._describe(self.flags, payloads, offsets)
        header["handles"] = self.exports.take_new()
        self.request(header, payloads, fds)
        self.shared, self.shared_grads, self.layout = buffers, grads, layout
        self.prediction = None

    def _buffer(self, value, offsets: dict[int, int]):
        if not isinstance(value, torch.Tensor):
            return value
        if value.device.type == "cpu":
            return self.arena.tensor(offsets[id(value)], value)
        nbytes = max(value.numel() * value.element_size(), 1)
        block = cudaipc.alloc(nbytes)
        self._keep = getattr(self, "_keep", []) + [block]
        return cudaipc.tensor_at(block.ptr, nbytes, value.dtype, list(value.shape), _contiguous(value.shape), 0,
                                 value.device)

    def _describe(self, value, payloads: list[bytes], offsets: dict[int, int]) -> dict[str, Any]:
        if isinstance(value, torch.Tensor) and value.device.type == "cpu" and self.arena is not None:
            return {"kind": "shm", "arena": 0, "offset": int(value.storage_offset()) * value.element_size()
                    // value.element_size(), "dtype": protocol.dtype_name(value.dtype), "shape": list(value.shape),
                    "stride": list(value.stride())}
        return protocol.describe(value, payloads, exports=self.exports)

    def _flag_words(self) -> None:
        from .. import timing  # noqa: PLC0415 -- timing is optional to the checker (main.optional_module): a broken one costs the timing, not the verdict

        if self.flags is not None:
            return
        block = cudaipc.alloc(16)
        self._keep = getattr(self, "_keep", []) + [block]
        self.flags = cudaipc.tensor_at(block.ptr, 16, torch.int32, [4], [1], 0, torch.device(self.device))
        self.flags.zero_()
        self.flush = timing.L2Flush(torch.device(self.device))
        self.flush()  # its kernel loaded now, not inside a call (module loading may synchronize)
        torch.cuda.current_stream(torch.device(self.device)).synchronize()
        self.imports = protocol.Imports(torch.device(self.device))

    # ------------------------------------------------------------------ calls

    def call(self, pristine: list, grad_outputs: list | None = None, *, phase: str, record: bool = False
             ) -> CallResult:
        """One call on copies of `pristine` (and of `grad_outputs`); `phase` is the runner's
        profiler phase ("trials" or "timed"), `record` asks for its dispatcher record."""
        self.n += 1
        message = {"op": protocol.CALL, "n": self.n, "phase": phase, "record": bool(record),
                   "rng": self.rng.getrandbits(62)}
        if not self.gpu:
            return self._call_host(pristine, grad_outputs or [], message)
        try:
            return self._call_device(pristine, grad_outputs or [], message)
        except RunnerGone:
            raise
        except Exception as exc:  # noqa: BLE001 - only a CUDA fault is the candidate's; the rest is raised
            fault = shared_fault(exc)
            if not fault:
                raise
            self.faulted = True
            return CallResult(self.n, error=fault, error_type="CudaFault")

    def _call_host(self, pristine: list, grads: list, message: dict[str, Any]) -> CallResult:
        _refill(self.shared, pristine)
        _refill(self.shared_grads, grads)
        started = time.perf_counter()
        reply = self.request(message)
        ms = (time.perf_counter() - started) * 1e3
        result = self._result(reply)
        if result.error is None:
            result.outputs = [o.clone() for o in self._outputs(reply)]
            result.ms = ms
            self._split_grads(result, reply)
        return result

    def _call_device(self, pristine: list, grads: list, message: dict[str, Any]) -> CallResult:
        n = message["n"]
        stream = torch.cuda.current_stream(torch.device(self.device))
        handle = stream.cuda_stream
        gate, go, done = (self.flags.data_ptr() + 4 * k for k in range(3))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.send(message)  # first: see the module docstring
        try:
            memops.wait(handle, gate, n)
            self.flush()
            _refill(self.shared, pristine)
            _refill(self.shared_grads, grads)
            start.record(stream)
            memops.write(handle, go, n)
            memops.wait(handle, done, n)
            end.record(stream)
            predicted = self._predicted_copies()
            reply = self.reply()
        except RunnerGone:
            self.unblock(n)
            raise
        result = self._result(reply)
        if result.error is not None:
            try:  # a fault in the runner may have broken this process's context too (one MPS server)
                self.unblock(n)
                self._settle(end)
            except Exception:  # noqa: BLE001 - the candidate's error is the verdict
                pass
            return result
        descriptors = list(reply.header.get("outputs") or [])
        if predicted is not None and descriptors == self.prediction:
            outputs = predicted
        else:  # outputs elsewhere: copied now, and the clock stops now
            self.imports.add(reply.header.get("handles"))
            result.late = True
            end = torch.cuda.Event(enable_timing=True)
            end.record(stream)
            outputs = self.with_room(lambda: [o.clone() for o in self._outputs(reply)])
            self.prediction, self.snaps = descriptors, outputs
        self._settle(end)
        result.outputs = self.with_room(lambda: [o.clone() for o in outputs])
        result.ms = start.elapsed_time(end)
        self._split_grads(result, reply)
        return result

    def recopy(self) -> list | None:
        """The last call's outputs copied again once the runner's device work has drained (None off
        a GPU or before any prediction): work that escaped the call's stream shows as a change."""
        if not self.gpu or not self.prediction:
            return None
        self.request({"op": protocol.SYNC})
        views = [protocol.rebuild(d, [], inputs=self.shared, imports=self.imports) for d in self.prediction]
        copies = [v.clone() for v in views]
        torch.cuda.current_stream(torch.device(self.device)).synchronize()
        return copies

    def _predicted_copies(self):
        """Copies of the last call's output places, enqueued right after `done` (None: no prediction)."""
        if not self.prediction:
            return None
        try:
            views = [protocol.rebuild(d, [], inputs=self.shared, imports=self.imports) for d in self.prediction]
        except protocol.ChannelError:
            return None
        for snap, view in zip(self.snaps, views, strict=True):
            snap.copy_(view)
        return self.snaps

    def _outputs(self, reply: protocol.Frame) -> list:
        arenas = [self.arena.map] if self.arena is not None else []
        try:
            return [protocol.rebuild(d, reply.payloads, arenas, inputs=self.shared, imports=self.imports)
                    for d in reply.header.get("outputs") or []]
        except (protocol.ChannelError, KeyError, TypeError, ValueError) as exc:
            raise RunnerGone(f"the candidate's process described its outputs wrongly: {exc}") from exc

    def _result(self, reply: protocol.Frame) -> CallResult:
        header = reply.header
        if int(header.get("n", -1)) != self.n:
            raise RunnerGone(f"the candidate's process answered call {header.get('n')} to call {self.n}")
        return CallResult(self.n, error=header.get("error"), error_type=str(header.get("error_type") or ""),
                          types=[str(t) for t in header.get("types") or []])

    def _split_grads(self, result: CallResult, reply: protocol.Frame) -> None:
        names = [str(n) for n in reply.header.get("grad_names") or []]
        if names and len(names) <= len(result.outputs):
            split = len(result.outputs) - len(names)
            result.grads = dict(zip(names, result.outputs[split:], strict=True))
            result.outputs = result.outputs[:split]
            result.types = result.types[:split]

    def _settle(self, event) -> None:
        """Wait for the checker's stream, with the channel's deadline: a runner that claims a call
        done without writing `done` would otherwise hold it forever."""
        deadline = time.monotonic() + self.timeout_s
        while not event.query():
            if time.monotonic() > deadline:
                self.unblock(self.n)
                raise RunnerGone("the candidate's process answered without finishing the call on the device "
                                 "(the flag it writes after forward never came)")
            time.sleep(REPLY_POLL_S)

    def unblock(self, n: int) -> None:
        """Release this process's stream from waits on flags the runner will never write."""
        if self.flags is None:
            return
        side = torch.cuda.Stream(torch.device(self.device))
        for k in range(3):
            memops.write(side.cuda_stream, self.flags.data_ptr() + 4 * k, n)
        side.synchronize()

    def runner_times(self, report: dict[str, Any]) -> dict[int, float]:
        """The runner's own event times per call (self_time)."""
        return {int(k): float(v) for k, v in (report.get("event_ms") or {}).items()}


def _layout(values: list) -> list[tuple]:
    return [("tensor", tuple(v.shape), str(v.dtype), v.device.type) if isinstance(v, torch.Tensor) else ("value",)
            for v in values]


def _refill(buffers: list, values: list) -> None:
    for buffer, value in zip(buffers, values, strict=False):
        if isinstance(buffer, torch.Tensor) and isinstance(value, torch.Tensor):
            buffer.copy_(value)


def _contiguous(shape) -> list[int]:
    strides, step = [], 1
    for size in reversed(list(shape)):
        strides.append(step)
        step *= max(int(size), 1)
    return list(reversed(strides))
