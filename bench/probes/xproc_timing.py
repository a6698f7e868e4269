"""Probe: can a trusted process time GPU work that another process launches?

Checker = this process; runner = a spawned child holding the workload. Methods:
  inproc   : the runner times itself (CUDA events, L2 flushed before each call): today's judge
  memops   : checker pre-enqueues flush -> wait(gate>=i) -> t0 -> write(go=i) -> wait(done>=i) -> t1;
             runner enqueues write(gate=i) -> wait(go>=i) -> fn -> write(done=i). Flags are device
             memory of the checker's, opened by the runner through CUDA IPC (cuStreamWaitValue32 /
             cuStreamWriteValue32).
  events   : checker flush -> t0 -> record(go) -> message; runner wait(go) -> fn -> record(done) ->
             message; checker wait(done) -> t1 (interprocess events)
Also: CUPTI (torch.profiler CUDA activity) overhead on the runner, whether it sees kernels launched on
another thread, and whether CPU-op profiling sees ops on another thread.
"""
from __future__ import annotations

import ctypes
import json
import os
import statistics
import sys
import threading

import torch
import torch.multiprocessing as mp

N_CALLS = 60
FLUSH_BYTES = 256 << 20


def _cu():
    lib = ctypes.CDLL("libcuda.so.1")
    fns = {}
    for name in ("cuStreamWaitValue32_v2", "cuStreamWriteValue32_v2", "cuStreamWaitValue32", "cuStreamWriteValue32"):
        try:
            f = getattr(lib, name)
            f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
            f.restype = ctypes.c_int
            fns[name] = f
        except AttributeError:
            pass
    return fns


CU = None


def wait_value(stream, ptr, value):
    f = CU.get("cuStreamWaitValue32_v2") or CU["cuStreamWaitValue32"]
    rc = f(ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(ptr), ctypes.c_uint32(value), 0)
    if rc != 0:
        raise RuntimeError(f"cuStreamWaitValue32 rc={rc}")


def write_value(stream, ptr, value):
    f = CU.get("cuStreamWriteValue32_v2") or CU["cuStreamWriteValue32"]
    rc = f(ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(ptr), ctypes.c_uint32(value), 0)
    if rc != 0:
        raise RuntimeError(f"cuStreamWriteValue32 rc={rc}")


def workloads():
    dev = "cuda"
    x1 = torch.randn(1 << 20, device=dev)
    x16 = torch.randn(16 << 20, device=dev)
    x256 = torch.randn(256 << 20, device=dev)
    a = torch.randn(4096, 4096, device=dev)
    b = torch.randn(4096, 4096, device=dev)
    ab = a.bfloat16(); bb = b.bfloat16()
    s = torch.randn(1024, device=dev)

    def launch20():
        y = s
        for _ in range(20):
            y = y + 1.0
        return y

    return {
        "empty": lambda: None,
        "relu_1M": lambda: torch.relu(x1),
        "relu_16M": lambda: torch.relu(x16),
        "relu_256M": lambda: torch.relu(x256),
        "mm_fp32_4096": lambda: a @ b,
        "mm_bf16_4096": lambda: ab @ bb,
        "launch20": launch20,
    }


def _recv(conn, timeout=60):
    if not conn.poll(timeout):
        raise TimeoutError("runner did not answer")
    msg = conn.recv()
    if isinstance(msg, str) and msg.startswith("ERROR"):
        raise RuntimeError(msg)
    return msg


def median_ms(xs):
    return round(statistics.median(xs), 4)


def inproc(fns, flush):
    out = {}
    sink = torch.empty((), dtype=torch.int64, device="cuda")
    for name, fn in fns.items():
        times = []
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        for _ in range(N_CALLS):
            torch.sum(flush.view(torch.int64), 0, out=sink)
            s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
            s.record(); fn(); e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        out[name] = median_ms(times)
    return out


def runner_main(conn, handles):
    try:
        _runner_main(conn, handles)
    except BaseException as exc:  # noqa: BLE001
        conn.send(f"ERROR {type(exc).__name__}: {exc}")


def _runner_main(conn, handles):
    global CU
    CU = _cu()
    torch.cuda.set_device(0)
    flags = torch.UntypedStorage._new_shared_cuda(*handles["flags"])
    flag_t = torch.empty(0, dtype=torch.int32, device="cuda").set_(flags)
    gate, go, done = (flag_t.data_ptr() + 4 * k for k in range(3))
    ev_go = torch.cuda.Event.from_ipc_handle(0, handles["ev_go"])
    ev_done = torch.cuda.Event.from_ipc_handle(0, handles["ev_done"])
    fns = workloads()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream()
    noop = torch.zeros(1, device="cuda")
    prof = None
    while True:
        msg = conn.recv()
        kind = msg[0]
        if kind == "quit":
            break
        if kind == "inproc":
            conn.send(inproc(fns, flush))
        elif kind == "memops":
            _, name, i, variant = msg
            if variant == "runner_flush" or variant.startswith("inwin_"):
                flush.zero_()
            elif variant in ("noop", "refill_read_flush_noop"):
                noop.add_(1)
            write_value(stream, gate, i)
            wait_value(stream, go, i)
            fns[name]()
            write_value(stream, done, i)
            conn.send("queued")
        elif kind == "events":
            _, name = msg
            stream.wait_event(ev_go)
            fns[name]()
            ev_done.record(stream)
            conn.send("queued")
        elif kind == "warm":
            for fn in fns.values():
                fn()
            torch.cuda.synchronize()
            conn.send("ok")
        elif kind == "prof_start":
            from torch.profiler import ProfilerActivity, profile
            prof = profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU])
            prof.__enter__()
            conn.send("ok")
        elif kind == "prof_stop":
            torch.cuda.synchronize()
            prof.__exit__(None, None, None)
            names = [e.name for e in prof.events()]
            conn.send({"n_events": len(names), "sample": names[:5]})
            prof = None
        elif kind == "thread_test":
            from torch.profiler import ProfilerActivity, profile
            res = {}
            x = torch.randn(1 << 20, device="cuda")
            with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as p:
                t = threading.Thread(target=torch.sigmoid, args=(x,)); t.start(); t.join()
                torch.cuda.synchronize()
            names = [(e.name, getattr(e, "device_type", None).__str__()) for e in p.events()]
            res["thread_events"] = [n for n in names if "sigmoid" in n[0].lower()]
            conn.send(res)


def run_memops(conn, flags_t, name, flush, n=N_CALLS, variant="checker_flush"):
    stream = torch.cuda.current_stream()
    gate, go, done = (flags_t.data_ptr() + 4 * k for k in range(3))
    pairs = []
    for _ in range(n):
        run_memops.counter += 1
        i = run_memops.counter
        if variant in ("checker_flush", "noop"):
            flush.zero_()
        if variant == "realistic":
            REFILL[1].copy_(REFILL[0])
            flush.zero_()
        if variant in ("read_flush", "refill_read_flush", "refill_read_flush_noop"):
            if variant != "read_flush":
                REFILL[1].copy_(REFILL[0])
            torch.sum(flush.view(torch.int64), 0, out=REFILL[3])
        wait_value(stream, gate, i)
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        if variant.startswith("inwin_"):
            _, how, size = variant.split("_")
            src_t, dst_t = (REFILL[0], REFILL[1]) if size == "64M" else (REFILL[4], REFILL[5])
            s0 = torch.cuda.Event(enable_timing=True)
            s0.record(stream)
            if how == "ce":
                dst_t.copy_(src_t)
            else:
                torch.add(src_t, 0.0, out=dst_t)
        s.record(stream)
        write_value(stream, go, i)
        wait_value(stream, done, i)
        e.record(stream)
        if variant == "realistic":
            REFILL[2].copy_(flags_t[:8])
        conn.send(("memops", name, i, variant))
        assert _recv(conn) == "queued"
        pairs.append((s, e))
        torch.cuda.synchronize()
    xs = sorted(s.elapsed_time(e) for s, e in pairs)
    return [round(xs[len(xs) // 10], 4), round(statistics.median(xs), 4), round(xs[9 * len(xs) // 10], 4)]


run_memops.counter = 0
REFILL = []


def run_events(conn, ev_go, ev_done, name, flush, n=N_CALLS):
    stream = torch.cuda.current_stream()
    pairs = []
    for _ in range(n):
        flush.zero_()
        s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
        s.record(stream)
        ev_go.record(stream)
        conn.send(("events", name))
        assert _recv(conn) == "queued"
        stream.wait_event(ev_done)
        e.record(stream)
        pairs.append((s, e))
        torch.cuda.synchronize()
    return median_ms([s.elapsed_time(e) for s, e in pairs])


def main():
    global CU
    CU = _cu()
    out_dir = os.environ.get("OUT", ".")
    result = {"cu_symbols": sorted(CU), "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    torch.cuda.set_device(0)
    flags = torch.zeros(16, dtype=torch.int32, device="cuda")
    ev_go = torch.cuda.Event(interprocess=True)
    ev_done = torch.cuda.Event(interprocess=True)
    ev_go.record(); ev_done.record(); torch.cuda.synchronize()
    handles = {"flags": flags.untyped_storage()._share_cuda_(), "ev_go": ev_go.ipc_handle(),
               "ev_done": ev_done.ipc_handle()}
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=runner_main, args=(child, handles))
    proc.start()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    parent.send(("warm",)); _recv(parent)
    names = ["empty", "relu_1M", "relu_16M", "relu_256M", "mm_fp32_4096", "mm_bf16_4096", "launch20"]
    result["inproc"] = (parent.send(("inproc",)), _recv(parent))[1]
    REFILL.extend([torch.randn(16 << 20, device="cuda"), torch.empty(16 << 20, device="cuda"),
                   torch.empty(8, dtype=torch.int32, device="cuda"), torch.empty((), dtype=torch.int64, device="cuda")])
    REFILL.extend([torch.randn(1 << 18, device="cuda"), torch.empty(1 << 18, device="cuda")])
    for variant in ("runner_flush", "inwin_ce_64M", "inwin_sm_64M", "inwin_ce_1M", "inwin_sm_1M", "runner_flush"):
        result["memops_" + variant] = {name: run_memops(parent, flags, name, flush, variant=variant) for name in names[:3] + names[5:]}
        print(variant, json.dumps(result["memops_" + variant]), flush=True)
    result["inproc_again"] = (parent.send(("inproc",)), _recv(parent))[1]

    parent.send(("quit",)); proc.join(30)
    result["mempool"] = hasattr(torch.cuda, "MemPool")
    text = json.dumps(result, indent=1)
    print(text)
    with open(os.path.join(out_dir, os.environ.get("PROBE_NAME", "xproc_timing") + ".json"), "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    sys.exit(main())
