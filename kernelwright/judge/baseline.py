"""What a candidate must beat: the reference under torch eager and torch.compile, timed alike.

Each baseline is timed with `timing.measure` in its own subprocess (`python -m
kernelwright.judge.baseline ...`) that loads only the problem: no candidate code ever shares its
process, so nothing a candidate patches can touch a baseline. Results are cached on disk, one JSON
file per baseline kind, keyed by the problem file's content, the size overrides, the device name,
the torch version, the precision setting and the timing parameters; a later candidate of the same
problem reuses them.

Kinds: "eager", "compile_default" (torch.compile()), "compile_max_autotune" (mode="max-autotune").
On the CPU only "eager" runs unless asked (`allow_cpu_compile`): compiling on the CPU needs a C++
compiler, is slow, and says nothing about GPU speed.

A reference that is a kernel itself (Triton, or a CUDA extension: problem/reference.py) is timed as
written and labelled so ("reference kernel (Triton)"); torch.compile is skipped for it, with the
reason, because it leaves user kernels as they are. A problem whose backward pass is part of the
work is timed forward + backward (judge/grad.py), as its candidates are.

Sizes: pass the problem's effective overrides (`Problem.overrides` after any shrink); the
subprocess loads the problem with exactly those and never shrinks on its own.

Noise: a baseline multiplies into every speedup of its problem, so one disturbed measurement must
not be cached. The subprocess times the reference in repeats (each a full `timing.measure`) until
two of them are *tight* (inter-quartile range at most NOISY_IQR_SHARE of the median) and *agree*
(medians within REPEAT_AGREEMENT of each other); the lower of those two is the baseline. After
MAX_REPEATS repeats without such a pair the fastest repeat is kept and marked noisy: the cache
file, `Baselines.measured[kind]["steady"] = False` and a `baseline_noisy` flag on every verdict
that uses it say so. `get_baselines(..., force=True)` (`kernelwright baseline --force`) measures
again and replaces the cached file. `Baselines.measured[kind]` records which measurement a
speedup was computed from: cache file, key digest, when it was measured, every repeat.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any

from kernelwright.files import locked_beside
from kernelwright.problem import load_problem

from ..problem.reference import scan_source
from . import kernel_times, timed
from .cachedir import cache_root as judge_cache
from .compile import install_build_cache
from .config import JudgeConfig
from .env import device_name
from .gpulock import lock_for
from .toolchain import installed_torch
from .verdict import WARN, Baselines, Flag, TimingStats

KINDS = ("eager", "compile_default", "compile_max_autotune")
# the repeat rule is the candidate's too (judge/timed.py); PROTOCOL is part of the cache key, so
# baselines cached under an older rule are measured again
PROTOCOL = "repeats-v1"
_COMPILE_MODE = {"compile_default": None, "compile_max_autotune": "max-autotune"}
_TIMING_FIELDS = ("warmup_ms", "rep_ms", "min_reps", "max_reps", "flush_l2", "cuda_graph")


def cache_root(config: JudgeConfig) -> Path:
    return judge_cache(config.cache_dir) / "baselines"


def cache_key(problem_path: str | os.PathLike, overrides: dict[str, Any], config: JudgeConfig, device: str,
              kind: str, device_label: str | None = None) -> dict[str, Any]:
    """Everything a baseline time depends on (the problem by content, not by path). `device_label`
    is `env.device_name(device)` when the caller knows it: the judge's supervisor, which asks
    without importing torch, got it from its worker before any candidate code ran."""
    source = Path(problem_path).read_bytes()
    key = {
        "problem_sha256": hashlib.sha256(source).hexdigest(),
        "overrides": repr(sorted((overrides or {}).items())),
        "device": device_label or device_name(device),
        "torch": installed_torch().get("__version__", ""),
        "kind": kind,
        "seed": config.seed,
        "allow_tf32": config.allow_tf32,
        "timing": {name: getattr(config, name) for name in _TIMING_FIELDS},
        "protocol": PROTOCOL,
    }
    if kind != "eager":
        key["triton"] = triton_version()
    return key


def triton_version() -> str:
    try:
        return version("triton")  # without importing it (the supervisor never imports torch or triton)
    except Exception:  # noqa: BLE001 - another distribution name: ask the module
        pass
    try:
        import triton  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py); triton may be absent

        return triton.__version__
    except Exception:  # noqa: BLE001 -- torch.compile without triton (CPU): the C++ backend decides
        return ""


def cache_file(problem_path, key: dict[str, Any], config: JudgeConfig) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return cache_root(config) / f"{Path(problem_path).stem}__{key['kind']}__{digest}.json"


def wanted_kinds(config: JudgeConfig, device: str, allow_cpu_compile: bool,
                 reference_kind: str = "torch") -> tuple[list[str], dict[str, str]]:
    """(kinds to time, kinds skipped -> why)."""
    kinds, skipped = [], {}
    for kind in config.baselines:
        if kind not in KINDS:
            skipped[kind] = f"unknown baseline {kind!r}; known: {', '.join(KINDS)}"
        elif kind != "eager" and reference_kind != "torch":
            skipped[kind] = (f"not applicable: the reference is a {reference_kind} kernel, which torch.compile leaves "
                             "as it is (it would time the same kernel); the reference kernel is the baseline")
        elif kind != "eager" and not str(device).startswith("cuda") and not allow_cpu_compile:
            skipped[kind] = "skipped on CPU: torch.compile there needs a C++ toolchain and measures nothing about GPUs"
        else:
            kinds.append(kind)
    return kinds, skipped


def get_baselines(problem_path: str | os.PathLike, overrides: dict[str, Any] | None, config: JudgeConfig,
                  device: str, allow_cpu_compile: bool = False, device_label: str | None = None,
                  force: bool = False) -> Baselines:
    """Baseline timings for the problem at these sizes on `device`; failures go to `.errors`.
    `force` measures again even when a cached measurement exists (and replaces it). Called only by
    processes that run no candidate code (the judge's supervisor, the CLI)."""
    overrides = dict(overrides or {})
    source = Path(problem_path).read_text(errors="replace")
    reference = scan_source(source)
    kinds, errors = wanted_kinds(config, device, allow_cpu_compile, reference.kind)
    result = Baselines(errors=dict(errors), eager_label=reference.baseline_label(),
                       work="forward+backward" if reference.backward else "forward")
    hits = []
    outcomes = _each_kind(kinds, lambda kind: _one_kind(problem_path, overrides, config, device, kind,
                                                          device_label, force))
    for kind, (path, key, record, error) in zip(kinds, outcomes, strict=True):
        if error:
            result.errors[kind] = error
            hits.append(False)
            continue
        hits.append(record["from_cache"])
        setattr(result, kind, TimingStats(**record["timing"]))
        result.measured[kind] = provenance(path, key, record)
        if kind == "eager" and isinstance(record.get("kernels"), dict):
            result.kernels = dict(record["kernels"])
    result.cached = bool(hits) and all(hits)
    return result


def _each_kind(kinds: list[str], one) -> list:
    """`one(kind)` for every kind, concurrently (each kind is its own subprocess under its own cache
    lock, so a problem's baselines take about as long as its slowest kind, not the sum; the timing
    itself stays exclusive: each subprocess holds the device lock around its measurement)."""
    if len(kinds) < 2:
        return [one(kind) for kind in kinds]
    with ThreadPoolExecutor(len(kinds), thread_name_prefix="kw-baseline-kind") as kinds_at_once:
        return list(kinds_at_once.map(one, kinds))


def _one_kind(problem_path, overrides: dict[str, Any], config: JudgeConfig, device: str, kind: str,
              device_label: str | None, force: bool):
    """(cache file, key, record, None) from the cache or measured now, or (path, key, None, error)."""
    key = cache_key(problem_path, overrides, config, device, kind, device_label)
    path = cache_file(problem_path, key, config)
    record = None if force else _read_cached(path, key)
    if record is not None:
        return path, key, record, None
    # one process measures, the others (candidates of the same problem judged at the same time,
    # the batch runner's baseline lane) wait for its result instead of measuring it again
    with locked_beside(path):
        record = None if force else _read_cached(path, key)
        if record is None:
            measured, error = _run_subprocess(problem_path, overrides, config, device, kind)
            if error:
                return path, key, None, error
            record = _write_cached(path, key, measured)
            record["from_cache"] = False
    return path, key, record, None


def missing_kinds(problem_path: str | os.PathLike, overrides: dict[str, Any] | None, config: JudgeConfig,
                  device: str, device_label: str, allow_cpu_compile: bool = False) -> list[str]:
    """The wanted baseline kinds that have no cached record for these parameters (a look, no lock,
    nothing measured): what `get_baselines` would measure now."""
    reference = scan_source(Path(problem_path).read_text(errors="replace"))
    kinds, _ = wanted_kinds(config, device, allow_cpu_compile, reference.kind)
    missing = []
    for kind in kinds:
        key = cache_key(problem_path, dict(overrides or {}), config, device, kind, device_label)
        if _read_cached(cache_file(problem_path, key, config), key) is None:
            missing.append(kind)
    return missing


def provenance(path: Path, key: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """Which measurement a speedup is computed from (stored in `Baselines.measured[kind]`)."""
    return {"cache_file": path.name, "key_sha256": _key_digest(key), "measured_at": record.get("written"),
            "from_cache": record.get("from_cache", False), "steady": record.get("steady", True),
            "repeats": record.get("repeats", []), "rule": record.get("rule", "")}


def noise_flags(baselines: Baselines | None) -> list[Flag]:
    """A `baseline_noisy` warning for each baseline whose repeats never agreed."""
    flags = []
    for kind, info in ((baselines.measured if baselines else None) or {}).items():
        if not info.get("steady", True):
            medians = ", ".join(f"{r[0]:.4g}" for r in info.get("repeats", []))
            flags.append(Flag("baseline_noisy", WARN, f"the {kind} baseline stayed noisy over "
                              f"{len(info.get('repeats', []))} repeats (medians {medians} ms); speedups against "
                              "it are unreliable: re-measure with `kernelwright baseline --force` on a quiet machine"))
    return flags


def speedups(timing: TimingStats, baselines: Baselines | None) -> dict[str, float]:
    """Baseline median / candidate median per baseline kind (above 1: the candidate is faster)."""
    if baselines is None or timing is None or timing.median_ms <= 0:
        return {}
    out = {}
    for kind in KINDS:
        base = getattr(baselines, kind)
        if base is not None and base.median_ms > 0:
            out[kind] = base.median_ms / timing.median_ms
    return out


# ---------------------------------------------------------------- cache files


def _key_digest(key: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _read_cached(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cached record ({"timing", "repeats", "steady", "written", ...}) or None."""
    try:
        data = json.loads(path.read_text())
        if data.get("key") != key:
            return None
        TimingStats(**data["timing"])  # a readable record, or a miss
    except (OSError, ValueError, KeyError, TypeError):
        return None
    data["from_cache"] = True
    return data


def _write_cached(path: Path, key: dict[str, Any], measured: dict[str, Any]) -> dict[str, Any]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    record = {"key": key, "timing": measured["timing"], "repeats": measured.get("repeats", []),
              "steady": measured.get("steady", True), "rule": timed.RULE,
              "written": time.strftime("%Y-%m-%dT%H:%M:%S")}
    if measured.get("kernels"):
        record["kernels"] = measured["kernels"]  # the eager reference's per-kernel shares (GPU)
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(path)
    return dict(record)


# ---------------------------------------------------------------- the subprocess


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _run_subprocess(problem_path, overrides, config: JudgeConfig, device: str, kind: str):
    """({"timing", "repeats", "steady"}, None) or (None, error paragraph)."""
    timeout = config.timeout_s + (config.compile_timeout_s if kind != "eager" else 0)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH", "")) if p)
    env["KW_PARENT_PID"] = str(os.getpid())  # it dies with this process (guards.die_with_parent)
    with tempfile.TemporaryDirectory(prefix="kw_baseline_") as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "kernelwright.judge.baseline", "--problem", str(Path(problem_path).resolve()),
                   "--kind", kind, "--device", device, "--overrides", repr(overrides),
                   "--config", json.dumps(config.to_dict()), "--out", str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        except subprocess.TimeoutExpired:
            return None, f"{kind} baseline timed out after {timeout:.0f} s"
        try:
            data = json.loads(out.read_text())
        except (OSError, ValueError):
            tail = (done.stderr or done.stdout or "").strip()[-1500:]
            return None, f"{kind} baseline process exited with code {done.returncode}: {tail}"
    if "error" in data:
        return None, data["error"]
    return data, None


def time_baseline(problem_path: str, overrides: dict[str, Any], config: JudgeConfig, device: str,
                  kind: str) -> dict[str, Any]:
    """Run inside the subprocess: build the reference, optionally compile it, and time it exactly
    as a candidate is timed (`timed.time_model`). Returns {"timing", "repeats", "steady"}."""
    import torch  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    from .grad import runner_for  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)
    from .timing import measure  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    torch.backends.cuda.matmul.allow_tf32 = config.allow_tf32
    torch.backends.cudnn.allow_tf32 = config.allow_tf32
    _install_build_cache(config)  # a reference that builds its own extension loads it from the cache
    problem = load_problem(problem_path, overrides, shrink=False)
    model = problem.make_model(config.seed, device=device)
    inputs = timed.timing_inputs(problem, config, device)
    if kind != "eager":
        mode = _COMPILE_MODE[kind]
        model = torch.compile(model, mode=mode) if mode else torch.compile(model)
    runner = runner_for(problem, device)
    call = timed.model_call(model, inputs, runner, config.seed)  # forward + backward where it counts
    call()  # compiles (torch.compile) before the device is held: other workers may use it meanwhile
    lock = lock_for(device, config.cache_dir)
    result = timed.time_model(call, config, device, measure, hold=lock.exclusive)
    stats = result.stats
    notes = [stats.note] + ([f"torch.compile({_COMPILE_MODE[kind] or 'default'})"] if kind != "eager" else [])
    stats.note = "; ".join(filter(None, notes + (["forward + backward"] if runner is not None else [])))
    measured = {"timing": asdict(stats), "repeats": result.repeats, "steady": result.steady}
    if kind == "eager" and str(device).startswith("cuda"):
        measured["kernels"] = reference_kernels(call, device, lock)
    return measured


def reference_kernels(call, device: str, lock) -> dict[str, Any]:
    """The reference's own per-kernel shares (`kernel_times`: the record a candidate's verdict gets),
    recorded after its eager timing with the device held alone, read after the hold: what a round-1
    prompt shows of the reference (which cuBLAS/cuDNN/ATen kernels, their shares)."""
    with lock.exclusive():
        recording = kernel_times.record(call, device)
    return kernel_times.read(recording)


def _install_build_cache(config: JudgeConfig) -> None:
    try:
        install_build_cache(config.cache_dir)
    except Exception:  # noqa: BLE001 - without the cache torch builds in its own folder
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time one baseline of a problem (used by get_baselines).")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--overrides", default="{}", help="a Python dict literal")
    parser.add_argument("--config", default="{}", help="JudgeConfig as JSON")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    from .guards import die_with_parent  # noqa: PLC0415 -- the supervisor imports this module and never imports torch or triton (judge/supervisor.py)

    die_with_parent()
    try:
        config = JudgeConfig.from_dict(json.loads(args.config))
        record: dict[str, Any] = time_baseline(args.problem, ast.literal_eval(args.overrides), config,
                                               args.device, args.kind)
    except Exception as exc:  # noqa: BLE001 -- the parent reports it as Baselines.errors[kind]
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        record = {"error": f"{args.kind} baseline failed: {type(exc).__name__}: {exc}\n" + "".join(lines)[-1500:]}
    Path(args.out).write_text(json.dumps(record))
    return 0 if "timing" in record else 1


if __name__ == "__main__":
    sys.exit(main())
