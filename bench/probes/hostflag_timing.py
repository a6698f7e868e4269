"""Probe: a trusted process that times GPU work of another process from the CPU, through flags
in shared host memory, doing only copy-engine work (or none) on the GPU itself.

Per call i: the checker (this process) optionally does GPU work of its own (flush / refill /
snapshot, by copy or by kernel) and waits for it; then t0 = clock, go = i (host memory). The
runner's CPU spins on go, calls fn(), and its stream writes done = i into the same host memory
(cuStreamWriteValue32 on registered memory); the checker's CPU spins on done, t1 = clock.
"""
from __future__ import annotations

import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.multiprocessing as mp
from multiprocessing import shared_memory

N_CALLS = 60
FLUSH_BYTES = 256 << 20


def _write32():
    lib = ctypes.CDLL("libcuda.so.1")
    f = lib.cuStreamWriteValue32_v2
    f.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    f.restype = ctypes.c_int
    return f


def workloads():
    dev = "cuda"
    x1 = torch.randn(1 << 20, device=dev)
    x16 = torch.randn(16 << 20, device=dev)
    x256 = torch.randn(256 << 20, device=dev)
    a = torch.randn(4096, 4096, device=dev)
    b = torch.randn(4096, 4096, device=dev)
    ab, bb = a.bfloat16(), b.bfloat16()
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


def stats(xs):
    xs = sorted(xs)
    return [round(xs[len(xs) // 10], 4), round(statistics.median(xs), 4), round(xs[9 * len(xs) // 10], 4)]


def inproc(fns, flush):
    out = {}
    for name, fn in fns.items():
        times = []
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        for _ in range(N_CALLS):
            flush.zero_()
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        out[name] = stats(times)
    return out


def runner_main(conn, shm_name, out_handle):
    torch.cuda.set_device(0)
    write32 = _write32()
    shm = shared_memory.SharedMemory(name=shm_name)
    flags = np.frombuffer(shm.buf, dtype=np.int32)
    ptr = ctypes.addressof(ctypes.c_char.from_buffer(shm.buf))
    rc = torch.cuda.cudart().cudaHostRegister(ptr, 4096, 0x03)  # portable | mapped
    fns = workloads()
    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    out_store = torch.UntypedStorage._new_shared_cuda(*out_handle)
    out_t = torch.empty(0, dtype=torch.float32, device="cuda").set_(out_store)
    stream = torch.cuda.current_stream()
    conn.send({"register_rc": str(rc)})
    while True:
        msg = conn.recv()
        if msg[0] == "quit":
            break
        if msg[0] == "inproc":
            conn.send(inproc(fns, flush))
            continue
        if msg[0] == "warm":
            for fn in fns.values():
                fn()
            torch.cuda.synchronize()
            conn.send("ok")
            continue
        _, name, first, n, runner_flush = msg
        fn = fns[name]
        for i in range(first, first + n):
            if runner_flush:
                flush.zero_()
                torch.cuda.synchronize()
            while flags[0] < i:
                pass
            y = fn()
            if y is not None:
                out_t[: min(out_t.numel(), 1024)].copy_(y.reshape(-1)[:1024].float())  # a small export
            write32(ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(ptr + 4), ctypes.c_uint32(i), 0)
        conn.send("done")


def run(conn, flags, name, mode, state, flush_src, flush_dst, refill_src, refill_dst, out_t, snap, host_buf):
    n = N_CALLS
    first = state["i"] + 1
    state["i"] += n
    conn.send(("batch", name, first, n, mode == "runner_flush"))
    times = []
    for i in range(first, first + n):
        if mode in ("ce_flush", "ce_flush_refill_snapshot"):
            flush_dst.copy_(flush_src)  # cudaMemcpyAsync D2D
        if mode == "ce_flush_refill_snapshot":
            refill_dst.copy_(refill_src)
        if mode == "kernel_flush":
            flush_dst.zero_()
        if mode == "h2d_flush":
            flush_dst[: host_buf.numel()].copy_(host_buf, non_blocking=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        flags[0] = i
        while flags[1] < i:
            pass
        t1 = time.perf_counter_ns()
        if mode == "ce_flush_refill_snapshot":
            snap.copy_(out_t)
            torch.cuda.synchronize()
        times.append((t1 - t0) / 1e6)
    assert conn.recv() == "done"
    return stats(times)


def main():
    out_dir = os.environ.get("OUT", ".")
    torch.cuda.set_device(0)
    shm = shared_memory.SharedMemory(create=True, size=4096)
    flags = np.frombuffer(shm.buf, dtype=np.int32)
    flags[:] = 0
    out_t = torch.zeros(1 << 20, device="cuda")
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=runner_main, args=(child, shm.name, out_t.untyped_storage()._share_cuda_()))
    proc.start()
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "runner": parent.recv()}
    flush_src = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    flush_dst = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    refill_src = torch.randn(16 << 20, device="cuda")
    refill_dst = torch.empty(16 << 20, device="cuda")
    snap = torch.empty_like(out_t)
    host_buf = torch.empty(64 << 20, dtype=torch.uint8, pin_memory=True)
    parent.send(("warm",))
    parent.recv()
    parent.send(("inproc",))
    result["inproc"] = parent.recv()
    names = ["empty", "relu_1M", "relu_16M", "relu_256M", "mm_fp32_4096", "mm_bf16_4096", "launch20"]
    state = {"i": 0}
    for mode in ("no_gpu", "runner_flush", "ce_flush", "ce_flush_refill_snapshot", "kernel_flush", "h2d_flush"):
        result[mode] = {name: run(parent, flags, name, mode, state, flush_src, flush_dst, refill_src, refill_dst,
                                  out_t, snap, host_buf) for name in names}
        print(mode, json.dumps(result[mode]), flush=True)
    parent.send(("inproc",))
    result["inproc_again"] = parent.recv()
    parent.send(("quit",))
    proc.join(30)
    shm.close()
    shm.unlink()
    text = json.dumps(result, indent=1)
    print(text)
    with open(os.path.join(out_dir, os.environ.get("PROBE_NAME", "hostflag") + ".json"), "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    sys.exit(main())
