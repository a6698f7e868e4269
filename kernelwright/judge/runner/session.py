"""The runner's side of the call channel: one handler per message (`judge.protocol`).

Every call goes through `Session.call`, trials and timed calls alike: the same code, the same
instrumentation (the launch counters, the profiler of the phase), the same order of work. On a GPU
the call is fenced by the checker's flag words: write `gate` (ready), wait for `go` (the checker
has written this call's inputs and started its clock), run forward, write `done`. Only then are the
outputs described (a place in this process's device memory, exported once per allocation) and
the reply sent; functions the candidate replaced are looked for after the reply, so none of that
adds to the time. With `self_time` (no MPS on the GPU: the checker cannot time another process's
work precisely) the runner also records CUDA events around forward; the checker reports that
these came from the candidate's process.
"""
from __future__ import annotations

import contextlib
import os
import socket
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from ...problem import ProblemError, check_signatures, load_candidate, load_problem
from ...problem.errors import line_in_file
from ...problem.ops import OpRecorder
from .. import guards, memops, protocol
from ..compile import install_build_cache
from .observe import CALL_RANGE, TIMED, TRIALS, Observer


class Session:
    """One candidate in one runner process."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.device = "cpu"
        self.model = None
        self.module = None
        self.problem = None
        self.observer: Observer | None = None
        self.recorder = None  # the build cache's record
        self.candidate_path = Path("candidate.py")
        self.args: list = []
        self.grad_outputs: list = []
        self.backward: dict[str, Any] | None = None
        self.flags = None  # (gate, go, done) addresses of the checker's flag words
        self.self_time = False
        self.poison_sizes: list[int] = []
        self.exports = protocol.Exports()
        self.imports = None
        self.arenas: list = []
        self.outputs: list = []  # the last call's outputs, kept alive until the next call
        self.event_times: dict[int, tuple[Any, Any]] = {}  # call -> CUDA events (self_time)
        self.after_reply: list = []
        self.seed = 0
        self.grad_names: list[str] = []  # names of the gradients a backward call returns after its outputs

    # ------------------------------------------------------------------ the loop

    def serve(self) -> int:
        handlers = {protocol.LOAD: self.load, protocol.BUILD: self.build, protocol.INPUTS: self.inputs,
                    protocol.CALL: self.call, protocol.BURST: self.burst, protocol.REPORT: self.report,
                    protocol.FINISH: self.report, protocol.SYNC: self.sync, protocol.TRIM: self.trim}
        while True:
            try:
                frame = protocol.receive(self.sock)
            except protocol.ChannelError:
                return 0  # the checker is gone: nothing left to answer
            op = str(frame.header.get("op"))
            handler = handlers.get(op)
            try:
                reply, payloads = handler(frame) if handler else ({"error": f"unknown op {op!r}"}, [])
            except Exception:  # noqa: BLE001 - a runner bug (or a candidate breaking it): say so
                reply, payloads = {"error": "internal runner error: " + traceback.format_exc(limit=6)[-1500:],
                                   "internal": True}, []
            reply.setdefault("op", op)
            protocol.send(self.sock, reply, payloads)
            for task in self.after_reply:
                task()
            self.after_reply = []
            if op == protocol.FINISH:
                return 0

    # ------------------------------------------------------------------ loading

    def load(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """Import the problem (for its init inputs) and the candidate; no device work."""
        msg = frame.header
        self.candidate_path = Path(str(msg["candidate_path"]))
        source = _read(self.candidate_path)
        if self.observer is not None:  # a sweep's next instance (judge/sweep.py): same process, fresh record
            self.model = self.module = None
            self.observer.restart(source)
        else:
            self._first_load(msg, source)
        started = time.perf_counter()
        try:
            if self.problem is None:  # a sweep's later instances use the problem loaded for the first
                self.problem = load_problem(str(msg["problem_path"]), overrides=dict(msg.get("overrides") or {}),
                                            shrink=False)
            self.module = load_candidate(self.candidate_path)
            check_signatures(self.problem, self.module.ModelNew, self.candidate_path)
        except BaseException as exc:  # noqa: BLE001 - ProblemError, or SystemExit from the candidate
            message = str(exc) if isinstance(exc, ProblemError) else describe(exc, self.candidate_path, "import")
            return {"ok": False, "error": message, "compile": self._compile(time.perf_counter() - started, message),
                    "report": self.observer.report()}, []
        finally:
            self.observer.after_call("while loading the candidate")
        return {"ok": True, "compile": self._compile(time.perf_counter() - started, None)}, []

    def _first_load(self, msg: dict[str, Any], source: str) -> None:
        """The process's set-up, once: the device, the build cache, the instrumentation."""
        self.device = str(msg.get("device") or "cpu")
        self.seed = int(msg.get("seed") or 0)
        self.self_time = bool(msg.get("self_time"))
        self.backward = msg.get("backward")
        allow_tf32 = bool(msg.get("allow_tf32"))
        guards.set_full_precision(allow_tf32)
        if self.device.startswith("cuda"):
            _open_cuda(self.device)
            self.imports = protocol.Imports(self.device, trust_sizes=True)
        else:
            guards.enable_malloc_perturb()
        try:
            self.recorder = install_build_cache(msg.get("cache_dir"))
        except Exception as exc:  # noqa: BLE001 - builds then run uncached (and say so)
            self.recorder = None
            note = f"build cache unavailable: {type(exc).__name__}: {exc}"
        else:
            note = ""
        self.observer = Observer(self.device, source, allow_tf32)
        self.observer.install()
        if note:
            self.observer.notes.append(note)

    def _compile(self, seconds: float, error: str | None) -> dict[str, Any]:
        result = None
        if self.recorder is not None:
            with contextlib.suppress(Exception):
                result = asdict(self.recorder.result())
        result = result or {"ok": error is None, "seconds": round(seconds, 3)}
        if error is not None:
            result["ok"] = False
        return result

    def build(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """ModelNew(*get_init_inputs()) with the reference's seed, moved to the device."""
        try:
            self.model = self.problem.make_model(self.seed, self.device, cls=self.module.ModelNew)
        except BaseException as exc:  # noqa: BLE001 - candidate code
            return {"ok": False, "error": describe(exc, self.candidate_path, "ModelNew(*get_init_inputs())")}, []
        finally:
            self.observer.after_call("while building ModelNew")
        return {"ok": True}, []

    def inputs(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """The checker's shared input buffers (and output gradients, and flag words on a GPU)."""
        msg = frame.header
        if self.imports is not None:
            self.imports.add(msg.get("handles"))
        for fd in frame.fds:
            size = os.fstat(fd).st_size
            self.arenas.append(protocol.Arena(size, fd=fd).map)
        rebuild = lambda d: protocol.rebuild(d, frame.payloads, self.arenas, imports=self.imports)  # noqa: E731
        self.args = [rebuild(d) for d in msg.get("args") or []]
        self.grad_outputs = [None if d is None else rebuild(d) for d in msg.get("grad_outputs") or []]
        self.poison_sizes = [int(n) for n in msg.get("poison") or []]
        flags = msg.get("flags")
        if flags is not None:
            words = rebuild(flags)
            self.flags = tuple(words.data_ptr() + 4 * k for k in range(3))
        return {"ok": True}, []

    # ------------------------------------------------------------------ calls

    def call(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """One call of forward (forward + backward where that is the work) on the shared inputs."""
        msg = frame.header
        n = int(msg["n"])
        phase = TIMED if msg.get("phase") == TIMED else TRIALS
        self.outputs, self.grad_names = [], []
        self.observer.begin(phase)
        poison(self.device, self.poison_sizes)
        torch.manual_seed(int(msg.get("rng") or 0) % (2**63))
        recorder = _recorder(self.observer) if msg.get("record") else None
        stream = torch.cuda.current_stream().cuda_stream if self.flags else 0
        self.observer.mark(n, recorded=recorder is not None)
        events = None
        if self.flags:
            memops.write(stream, self.flags[0], n)  # gate: ready for this call's inputs
            memops.wait(stream, self.flags[1], n)  # go: the inputs are written and the clock runs
        if self.self_time and self.device.startswith("cuda"):
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record()
        outputs, error = self._forward(recorder)
        if events is not None:
            events[1].record()
            self.event_times[n] = events
        if self.flags:
            try:
                memops.write(stream, self.flags[2], n)  # done: whatever this stream ran is in the outputs
            except memops.MemopsError as exc:  # a broken context (the forward's fault, reported below)
                error = error or {"error": f"the call could not be completed on the device: {exc}"}
        if recorder is not None:
            self.observer.merge(recorder.buckets)
        self.after_reply.append(lambda: self.observer.after_call("during a call"))
        if error is not None:
            return {"n": n, **error}, []
        payloads: list[bytes] = []
        try:
            described = [protocol.describe(o, payloads, self.args, self.exports) for o in outputs]
        except Exception as exc:  # noqa: BLE001 - e.g. an output the driver cannot share
            return {"n": n, "error": f"the output could not be handed to the judge: {type(exc).__name__}: {exc}"}, []
        self.outputs = outputs
        return {"n": n, "outputs": described, "types": [type(o).__name__ for o in outputs],
                "grad_names": self.grad_names, "handles": self.exports.take_new()}, payloads

    def _forward(self, recorder) -> tuple[list, dict[str, Any] | None]:
        try:
            with torch.profiler.record_function(CALL_RANGE), recorder or contextlib.nullcontext():
                if self.backward is None:
                    with torch.no_grad():
                        out = self.model(*self.args)
                    return flatten(out), None
                return self._forward_backward(), None
        except BaseException as exc:  # noqa: BLE001 - candidate code: anything becomes a verdict
            return [], {"error": describe(exc, self.candidate_path, "ModelNew.forward"),
                        "error_type": f"{type(exc).__module__}.{type(exc).__name__}"}

    def _forward_backward(self) -> list:
        """Forward with gradients, then `torch.autograd.grad` against the checker's output gradients:
        the outputs, then the gradients of the counted inputs and of every parameter (in that order,
        the order the checker's `grad.GradRunner` names them)."""
        counted = self.backward.get("grad_inputs")
        call_args, leaves, names = list(self.args), [], []
        for index, arg in enumerate(self.args):
            if isinstance(arg, torch.Tensor) and arg.is_floating_point() and (counted is None or index in counted):
                leaf = arg.detach().requires_grad_(True)
                call_args[index] = leaf
                leaves.append(leaf)
                names.append(f"input {index}")
        named = [(f"parameter {n}", p) for n, p in self.model.named_parameters() if p.requires_grad]
        params = [p for _, p in named]
        self.grad_names = names + [n for n, _ in named]
        with torch.enable_grad():
            outs = flatten(self.model(*call_args))
        pairs = [(o, g) for o, g in zip(outs, self.grad_outputs, strict=False) if g is not None]
        live = [(o, g) for o, g in pairs if o.requires_grad]
        if pairs and not live:
            raise RuntimeError(NO_GRAPH)
        wrt = leaves + params
        if not live or not wrt:
            self.grad_names = []
            return [o.detach() for o in outs]
        grads = torch.autograd.grad([o for o, _ in live], wrt, [g for _, g in live], allow_unused=True)
        filled = [g if g is not None else torch.zeros_like(t) for g, t in zip(grads, wrt, strict=True)]
        return [o.detach() for o in outs] + filled

    def burst(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """Forward repeated for `ms` milliseconds on the current inputs (the energy window). The
        profiler's phase ends first: these calls have no marks, and their kernels would be filed
        under the last timed call (a cuBLAS + Triton candidate read as thousands of matmuls in one
        call, `observed_work`, H200 2026-11-28)."""
        if self.observer is not None:
            self.observer.end()
        seconds = float(frame.header.get("ms") or 0) / 1e3
        calls, deadline = 0, time.perf_counter() + seconds
        try:
            while calls == 0 or time.perf_counter() < deadline:
                with torch.no_grad():
                    self.model(*self.args)
                calls += 1
                if calls % 8 == 0 and self.device.startswith("cuda"):
                    torch.cuda.synchronize()
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            return {"calls": calls, "error": describe(exc, self.candidate_path, "ModelNew.forward")}, []
        return {"calls": calls}, []

    def sync(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """Wait until this process's device work has drained (the checker copies the outputs again)."""
        if self.device.startswith("cuda"):
            try:
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a broken context: the checker's first copy stands
                return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, []
        return {"ok": True}, []

    def trim(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """Give the device memory the allocator caches but no tensor uses back to the driver: the
        checker ran out of memory beside this process (a forward's freed workspace stays cached).
        What the candidate still holds live is its own; the reply says how much that is."""
        if not self.device.startswith("cuda"):
            return {"ok": True, "held": 0}, []
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            return {"ok": True, "held": int(torch.cuda.memory_reserved())}, []
        except Exception as exc:  # noqa: BLE001 - a broken context: the checker's retry shows it
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}, []

    def report(self, frame: protocol.Frame) -> tuple[dict[str, Any], list[bytes]]:
        """What was observed (ends the profiler's phase), the device time of self-timed calls, the
        most device memory this process's allocator held."""
        self.observer.end()
        report = self.observer.report()
        if self.event_times:
            torch.cuda.synchronize()
            report["event_ms"] = {str(n): s.elapsed_time(e) for n, (s, e) in self.event_times.items()}
            self.event_times = {}
        if self.device.startswith("cuda") and torch.cuda.is_initialized():
            report["gpu_peak_bytes"] = int(torch.cuda.max_memory_reserved())
        return {"report": report}, []


NO_GRAPH = ("the backward pass is part of this problem, but no floating output of ModelNew.forward is connected to "
            "autograd (requires_grad is False): wrap your kernels in a torch.autograd.Function whose backward "
            "launches your backward kernels, and return its outputs")


def _recorder(observer: Observer):
    return OpRecorder(origin=observer.own.origin)


def flatten(out) -> list:
    """A forward's result as a flat list of tensors; numbers become 0-d tensors; anything else is
    refused with the message the judge gives."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in flatten(item)]
    if isinstance(out, (bool, int, float)):
        return [torch.tensor(out)]
    raise TypeError(f"forward returned {type(out).__name__}; expected a tensor or a tuple/list of tensors")


def poison(device: str, sizes: list[int]) -> None:
    """Make the memory the candidate's outputs will likely be carved from hold poison bytes (0xFF:
    NaN in every float type): blocks of the outputs' sizes, filled and given back to the cache.
    Not `empty_cache`: the outputs then land where they did in the last call (`protocol.Exports`)."""
    if not sizes:
        return
    if device.startswith("cuda"):
        blocks = [torch.empty(max(n, 1), dtype=torch.uint8, device=device).fill_(0xFF) for n in sizes for _ in range(2)]
        torch.cuda.synchronize()
        del blocks
    else:
        scratch = torch.empty(max(min(2 * sum(sizes), 256 << 20), 1), dtype=torch.uint8).fill_(0xFE)
        del scratch


def describe(exc: BaseException, path: Path, what: str) -> str:
    """One paragraph naming the exception and the line of the candidate's file it came from."""
    line = line_in_file(exc, path)
    where = f" ({path}, line {line})" if line else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > 1500:
        text = text[:1500] + " [...]"
    return f"{what} raised {text}{where}"


def _open_cuda(device: str) -> None:
    """The CUDA context and torch's allocator, before any candidate code: allocations stay plain
    cudaMalloc blocks (expandable segments cannot be exported to the checker)."""
    index = torch.device(device).index
    if index is not None:
        torch.cuda.set_device(index)
    torch.empty(1, device=device)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""
