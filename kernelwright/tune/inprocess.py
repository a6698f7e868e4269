"""Measure instances inside this process: the fast evaluator for benchmarking the tuner itself.

The judge isolates every candidate in a fresh, sandboxed process, which is right for untrusted
code and slow for sweeping a few hundred configurations of a kernel the team wrote. Here each
instance is imported, checked once against the reference output, pruned if the compiler reports
spills or an over-limit resource, and timed with triton.testing.do_bench (CUDA) or wall clock
(CPU). Compilation can run ahead in a pool of processes that fill Triton's on-disk cache.
"""
from __future__ import annotations

import contextlib
import importlib.util
import multiprocessing
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import torch

from kernelwright.judge.config import DEFAULT_TOLERANCES
from kernelwright.judge.guards import set_full_precision
from kernelwright.problem import load_problem

from .evaluate import ERROR, FAIL, PASS, PRUNED, Measurement, instance_hash
from .hardware import DeviceLimits, detect_limits
from .prune import resource_violation
from .resources import triton_resources
from .template import Template


def load_module(path: Path):
    """Import a candidate file as a fresh module (Triton reads kernel source from the file)."""
    name = f"kw_instance_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def bench_ms(fn, device: str, warmup_ms: float = 25, rep_ms: float = 100) -> tuple[float, str]:
    """Median time of fn() in ms, and how it was taken."""
    if device == "cuda":
        import triton.testing  # noqa: PLC0415 -- triton.testing is heavy (its driver) and only the CUDA path times with do_bench

        try:
            return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")), "do_bench"
        except TypeError:  # older Triton: quantiles instead of return_mode
            return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5])), "do_bench"
    fn()
    times, deadline = [], time.perf_counter() + rep_ms / 1000
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return times[len(times) // 2], "wall_cpu"


def _outputs(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _tolerance(dtype: torch.dtype) -> float:
    return DEFAULT_TOLERANCES.get(str(dtype).replace("torch.", ""), 1e-4)


@contextlib.contextmanager
def full_fp32() -> Iterator[None]:
    """The reference in full fp32, with the judge's own switch (guards.set_full_precision): cuDNN
    convolutions default to TF32, whose 1e-3 errors failed correct instances on the GPU."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
             torch.get_float32_matmul_precision())
    set_full_precision(False)
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


class InProcessEvaluator:
    """Check and time instances of a template for one problem in this process."""

    def __init__(self, problem, *, device: str | None = None, seed: int = 0, warmup_ms: float = 25,
                 rep_ms: float = 100, limits: DeviceLimits | None = None, compile_workers: int = 0,
                 workdir: str | Path | None = None, allow_spills: bool = False):
        self.problem = problem
        self.kind = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.cuda.get_device_name() if self.kind == "cuda" else "cpu"
        self.seed, self.warmup_ms, self.rep_ms = seed, warmup_ms, rep_ms
        self.limits = limits or detect_limits()
        self.allow_spills = allow_spills
        self.compile_workers = compile_workers
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kw-inprocess-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.inputs = problem.make_inputs(seed, device=self.kind)
        with torch.no_grad(), full_fp32():
            reference = problem.make_model(seed, device=self.kind)
            self.expected = [t.detach().clone() for t in _outputs(reference(*self.inputs))]
        self._pool: ProcessPoolExecutor | None = None

    def evaluate(self, template: Template, configs: list[dict[str, Any]]) -> list[Measurement]:
        paths = [self.instance_path(template, c) for c in configs]
        if self.compile_workers > 1 and self.kind == "cuda" and len(paths) > 1:
            self._prewarm(paths)
        return [self._timed(c, p) for c, p in zip(configs, paths, strict=True)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def instance_path(self, template: Template, config: dict[str, Any]) -> Path:
        """The instance's file (written once), named by the hash of its source."""
        source = template.instantiate(config)
        path = self.workdir / f"i{instance_hash(source)}.py"
        if not path.exists():
            path.write_text(source)
        return path

    def _prewarm(self, paths: list[Path]) -> int:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(self.compile_workers, mp_context=context)
        jobs = [self._pool.submit(_compile_instance, str(self.problem.path), self.problem.overrides, str(p), self.seed,
                                  self.kind) for p in paths]
        done = 0
        for job in jobs:
            try:
                done += bool(job.result(timeout=600))
            except Exception:  # noqa: BLE001 -- a failed precompile is measured (and reported) again below
                pass
        return done

    def _timed(self, config: dict[str, Any], path: Path) -> Measurement:
        """A measurement with its cost: here the whole of it ran on the device it times."""
        start = time.perf_counter()
        m = self._measure(config, path)
        m.judge_s = m.device_s = time.perf_counter() - start
        return m

    def _measure(self, config: dict[str, Any], path: Path) -> Measurement:
        m = Measurement(config, ERROR, instance_hash=path.stem[1:])
        try:
            module = load_module(path)
            model = self.problem.make_model(self.seed, device=self.kind, cls=module.ModelNew)
            with torch.no_grad():
                got = _outputs(model(*self.inputs))
        except Exception as exc:  # noqa: BLE001 -- any failure of the instance is a measurement, not a crash
            m.stage, m.error = "compile", f"{type(exc).__name__}: {str(exc)[:2000]}"
            return m
        resources = triton_resources(module)
        m.resources = [r.to_dict() for r in resources]
        why = resource_violation(resources, self.limits, self.allow_spills)
        if why:
            m.status, m.stage, m.error = PRUNED, "compiled", why
            return m
        wrong = self._mismatch(got)
        if wrong:
            m.status, m.stage, m.error = FAIL, "check", wrong
            return m
        with torch.no_grad():
            m.time_ms, m.method = bench_ms(lambda: model(*self.inputs), self.kind, self.warmup_ms, self.rep_ms)
        m.status, m.stage = PASS, "done"
        if self.kind == "cpu":
            m.note = "CPU wall time: not GPU performance"
        return m

    def _mismatch(self, got: list[torch.Tensor]) -> str | None:
        if len(got) != len(self.expected):
            return f"{len(got)} outputs instead of {len(self.expected)}"
        for i, (a, b) in enumerate(zip(got, self.expected, strict=False)):
            if a.shape != b.shape or a.dtype != b.dtype:
                return f"output {i}: {tuple(a.shape)} {a.dtype} instead of {tuple(b.shape)} {b.dtype}"
            tol = _tolerance(b.dtype)
            if not torch.allclose(a.float(), b.float(), atol=tol, rtol=tol):
                err = (a.float() - b.float()).abs().max().item()
                return f"output {i} differs from the reference (max abs error {err:.3g}, tolerance {tol})"
        return None


_WORKER_PROBLEMS: dict[str, tuple] = {}  # per worker process: the problem and its inputs, made once


def _compile_instance(problem_path: str, overrides: dict, instance_path: str, seed: int, device: str) -> bool:
    """In a worker process: run the instance once so Triton compiles it into the on-disk cache."""
    key = repr((problem_path, sorted(overrides.items()), seed, device))
    if key not in _WORKER_PROBLEMS:
        _WORKER_PROBLEMS.clear()
        problem = load_problem(problem_path, overrides=overrides)
        _WORKER_PROBLEMS[key] = (problem, problem.make_inputs(seed, device=device))
    problem, inputs = _WORKER_PROBLEMS[key]
    module = load_module(Path(instance_path))
    model = problem.make_model(seed, device=device, cls=module.ModelNew)
    with torch.no_grad():
        model(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    return True
