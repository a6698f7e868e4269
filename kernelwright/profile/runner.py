"""The program profilers run: load a problem and a candidate, warm up, then run forward a few times.

    python -m kernelwright.profile.runner --problem P --candidate C --mode ncu|timeline --out result.json

`ncu` mode brackets the measured forwards with cudaProfilerStart/Stop, so ncu (started with
`--profile-from-start off`) sees neither compilation nor autotuning nor warm-up. `timeline` mode
measures plain time per call, energy per call and the torch-profiler timeline (its summary and the
compact events it was computed from, so a recording can be replayed), and lists the
compiled Triton kernels and extension binaries of the candidate for the resource and SASS pass.
Every outcome is written to `--out` as JSON; a failure is a JSON error, never only a traceback.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from kernelwright.problem import load_candidate, load_problem

from .energy import measure_energy
from .resources import triton_kernel_metadata
from .torchprof import PROFILER_WARMUP_CALLS, events_to_json, record_timeline, summarize_timeline


def _args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--mode", choices=("ncu", "timeline"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--artifacts", default="")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overrides", default="{}", help="JSON object of size overrides")
    parser.add_argument("--shrink", action="store_true")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--energy-seconds", type=float, default=0.0)
    return parser.parse_args(argv)


class ProfileSession:
    """A problem, the candidate model on the device, and inputs: everything `forward` needs."""

    def __init__(self, args: argparse.Namespace):
        import torch  # noqa: PLC0415 -- inside main's try: a broken torch is reported as the JSON error of the load stage, not a bare traceback


        self.torch = torch
        self.use_cuda = args.device.startswith("cuda") and torch.cuda.is_available()
        self.device = args.device if self.use_cuda else "cpu"
        problem = load_problem(args.problem, overrides=json.loads(args.overrides) or None, shrink=args.shrink or None)
        self.candidate = load_candidate(args.candidate)
        self.model = problem.make_model(args.seed, device=self.device, cls=self.candidate.ModelNew)
        self.inputs = problem.make_inputs(args.seed, device=self.device)

    def forward(self):
        with self.torch.no_grad():
            return self.model(*self.inputs)

    def sync(self):
        if self.use_cuda:
            self.torch.cuda.synchronize()

    def device_name(self) -> str:
        return self.torch.cuda.get_device_name() if self.use_cuda else "cpu"


def run_ncu_mode(session: ProfileSession, calls: int) -> dict:
    profiler = session.torch.cuda.profiler
    session.sync()
    if session.use_cuda:
        profiler.start()
    for _ in range(calls):
        session.forward()
    session.sync()
    if session.use_cuda:
        profiler.stop()
    return {"calls": calls}


def plain_ms_per_call(session: ProfileSession, calls: int) -> float:
    """Median wall time of one synchronised forward: the reference for profiling overhead."""
    times = []
    for _ in range(max(1, calls)):
        start = time.perf_counter()
        session.forward()
        session.sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_timeline_mode(session: ProfileSession, args: argparse.Namespace) -> dict:
    out = {"plain_ms_per_call": plain_ms_per_call(session, max(args.calls, 5))}
    if args.energy_seconds > 0 and session.use_cuda:
        index = session.torch.cuda.current_device()
        out["energy"] = measure_energy(session.forward, session.sync, args.energy_seconds, index).to_dict()
    events = record_timeline(session.forward, args.calls, session.use_cuda)
    timeline = summarize_timeline(events, skip=PROFILER_WARMUP_CALLS)
    timeline.device = session.device_name()
    timeline.plain_us_per_call = out["plain_ms_per_call"] * 1e3
    out["timeline"] = asdict(timeline)
    out["events"] = events_to_json(events)  # replayable: summarize_timeline(events_from_json(...))
    artifacts = Path(args.artifacts) if args.artifacts else None
    out["triton"] = triton_kernels(session.candidate, artifacts)
    out["binaries"] = extension_binaries(session.candidate)
    return out


def _jit_functions(module) -> list:
    """Triton JITFunctions among the module's globals, unwrapping autotuners and heuristics (`.fn`)."""
    try:
        from triton.runtime.jit import JITFunction  # noqa: PLC0415 -- triton may be absent or broken: then there are no Triton kernels
    except Exception:  # noqa: BLE001 -- no triton: no Triton kernels
        return []
    found = []
    for obj in list(vars(module).values()):
        try:
            for _ in range(4):
                if isinstance(obj, JITFunction) or obj is None:
                    break
                obj = getattr(obj, "fn", None)
        except Exception:  # noqa: BLE001 -- an object whose attribute access raises is not a kernel
            continue
        if isinstance(obj, JITFunction) and all(obj is not f for f in found):
            found.append(obj)
    return found


def _compiled(jit) -> list:
    """Compiled kernels of a JITFunction: `device_caches` (Triton >= 3.2) or `cache` (older)."""
    kernels = []
    for entry in getattr(jit, "device_caches", {}).values():
        cache = entry[0] if isinstance(entry, tuple) else entry
        if isinstance(cache, dict):
            kernels += list(cache.values())
    old = getattr(jit, "cache", None)
    if isinstance(old, dict):
        for per_device in old.values():
            if isinstance(per_device, dict):
                kernels += list(per_device.values())
    return [k for k in kernels if hasattr(k, "asm")]


def triton_kernels(module, artifacts: Path | None) -> list[dict]:
    """Metadata of every compiled Triton kernel of the candidate; cubins saved under `artifacts`."""
    out = []
    for jit in _jit_functions(module):
        for index, kernel in enumerate(_compiled(jit)):
            meta = triton_kernel_metadata(kernel)
            name = meta.get("name") or getattr(jit, "__name__", "triton_kernel")
            entry = {"name": name, "metadata": meta, "cubin": None}
            cubin = getattr(kernel, "asm", {}).get("cubin")
            if artifacts is not None and isinstance(cubin, (bytes, bytearray)):
                path = artifacts / "cubins" / f"{name}_{index}.cubin"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(cubin)
                entry["cubin"] = str(path)
            out.append(entry)
    return out


def extension_binaries(module) -> list[str]:
    """Shared libraries of compiled extensions the candidate holds (load_inline / load modules)."""
    paths = []
    for obj in list(vars(module).values()):
        path = getattr(obj, "__file__", None) if type(obj).__name__ == "module" else None
        if isinstance(path, str) and path.endswith(".so") and path not in paths:
            paths.append(path)
    return paths


def main(argv=None) -> int:
    args = _args(argv)
    out_path = Path(args.out)
    result: dict = {"ok": False, "stage": "load", "mode": args.mode}
    try:
        session = ProfileSession(args)
        result.update(stage="warmup", device=session.device_name())
        for _ in range(max(0, args.warmup)):
            session.forward()
        session.sync()
        result["stage"] = args.mode
        result.update(run_ncu_mode(session, args.calls) if args.mode == "ncu" else run_timeline_mode(session, args))
        result.update(ok=True, stage="done")
    except BaseException as exc:  # noqa: BLE001 -- the candidate is untrusted: report whatever it raised
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()[-4000:]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2, default=str))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
