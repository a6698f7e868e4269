"""The judge worker: `python -m kernelwright.judge.worker REQUEST.json [--phase evaluate|compile]`.

Runs in a fresh sandboxed process per candidate, forked by the judge's supervisor
(`supervisor.py`), which confines it before any of this runs: it may write only its work and
output folders, so what must land in the shared caches (extension builds, baselines) is asked of
the supervisor (`service`). The order of work is the defence:

1. import the judge's own modules (the timer and the guards capture the real timing and sync
   functions), force full fp32, load the problem (sizes overridden / shrunk);
2. compute the reference outputs of *every* trial before any candidate code exists in the
   process, so the candidate cannot patch the reference;
3. snapshot the identity of guarded functions and the precision switches;
4. load the candidate with the build cache installed, check signatures, build ModelNew with the
   reference's seed;
5. correctness trials on poisoned memory, then the hack guards; 6. timing, energy, baselines,
   floor; 7. the profile, when asked for.

Each step is a stage module of `kernelwright.judge.stages` with a typed result the next one takes
(`stages.records`: Loaded -> Built -> Checked), so the order above is in the types. Several
workers may share a GPU: correctness work holds the device's lock shared, timing, energy and
profiling hold it exclusively (`gpulock`). Wall seconds per stage go to `verdict.stage_seconds`.
The verdict is written to the result file at every stage, so a crash still leaves the last stage
reached; the final write happens before the process exits.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from .api import JudgeRequest
from . import jitpause
from .config import JudgeConfig
from .stages import check as check_stage
from .stages import compile as compile_stage
from .stages import finish, load
from .stages import profile as profile_stage
from .stages import time as time_stage
from .stages.context import Context, ResultWriter, read_text
from .stagetimes import StageTimer, process_age_s
from .verdict import ERROR, FAIL, PASS, Verdict

__all__ = ["ResultWriter", "evaluate", "main", "run_stages"]


def optional_module(name: str, notes: list[str]):
    """One of the judge's GPU-side modules (timing, compile, baseline, floor, env), or None when it
    cannot be imported; the verdict then carries a note saying so."""
    try:
        return importlib.import_module(f"kernelwright.judge.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"kernelwright.judge.{name}":
            notes.append(f"kernelwright.judge.{name} failed to import: {exc}")
        else:
            notes.append(f"kernelwright.judge.{name} is not installed")
    except Exception as exc:  # noqa: BLE001 - a broken judge module must not hide the verdict
        notes.append(f"kernelwright.judge.{name} failed to import: {type(exc).__name__}: {exc}")
    return None


# --------------------------------------------------------------------------- files


def materialise(request: JudgeRequest) -> tuple[Path, Path]:
    """Paths of the problem and candidate files, writing given source text into the cwd."""
    problem = Path(request.problem_path) if request.problem_path else _write_source(
        Path("problem"), request.problem_name, request.problem_source or "")
    return problem, materialise_candidate(request)


def materialise_candidate(request: JudgeRequest) -> Path:
    if request.candidate_path:
        return Path(request.candidate_path)
    return _write_source(Path("."), request.candidate_name, request.candidate_source or "")


def _write_source(folder: Path, name: str, text: str) -> Path:
    from .api import source_filename

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / source_filename(name)
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- the stages, in order


def run_stages(ctx: Context) -> None:
    uninstall = jitpause.install(lambda: ctx.off_device(lambda: jitpause.device_idle(ctx.verdict.device or "cpu")))
    try:
        stages_in_order(ctx)
    finally:
        uninstall()


def stages_in_order(ctx: Context) -> None:
    loaded = load.run(ctx)
    built = compile_stage.run(ctx, loaded) if loaded is not None else None
    checked = check_stage.run(ctx, built) if built is not None else None
    if checked is None:
        return
    if ctx.config.time and ctx.verdict.status != FAIL:
        finish.finalize(ctx, final=False)
        if ctx.verdict.status == PASS:
            time_stage.run(ctx, checked)
    if ctx.config.profile and not ctx.stopped:
        finish.finalize(ctx, final=False)
        if ctx.verdict.status == PASS:
            profile_stage.run(ctx, checked)


def evaluate(request: JudgeRequest, writer: ResultWriter, modules: dict[str, Any], notes: list[str],
             timer: StageTimer | None = None) -> Verdict:
    config = JudgeConfig.from_dict(request.config)
    verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, config=config.to_dict(),
                      rules=config.rules)
    ctx = Context(request, config, verdict, writer, modules=modules, notes=notes, timer=timer or StageTimer())
    try:
        ctx.problem_path, ctx.candidate_path = materialise(request)
        ctx.candidate_source = read_text(ctx.candidate_path)
        run_stages(ctx)
    except Exception:  # noqa: BLE001 - a judge bug: say so rather than blame the candidate
        ctx.stop(ERROR, "internal judge error: " + traceback.format_exc(limit=6)[-2000:])
    finish.finalize(ctx)
    return verdict


def compile_only(request: JudgeRequest, writer: ResultWriter, modules: dict[str, Any]) -> Verdict:
    """Phase A of the pool: import the candidate so its extensions land in the shared build cache."""
    config = JudgeConfig.from_dict(request.config)
    verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, stage="compile",
                      config=config.to_dict())
    ctx = Context(request, config, verdict, writer, modules=modules)
    ctx.candidate_path = materialise_candidate(request)
    ctx.candidate_source = read_text(ctx.candidate_path)
    compile_stage.compile_only(ctx)
    return verdict


# --------------------------------------------------------------------------- entry point


def load_judge_modules(notes: list[str]) -> dict[str, Any]:
    """Step 1: the judge's own modules, before anything of the candidate exists in the process.
    Importing timing captures the original timing functions; importing torch._dynamo now keeps its
    import-time patches (it wraps torch.manual_seed) out of the monkeypatch comparison."""
    from . import guards

    guards.die_with_parent()
    guards.apply_rlimits_from_env()
    guards.apply_thread_count()
    modules = {name: optional_module(name, notes) for name in ("timing", "compile", "baseline", "floor", "env")}
    try:
        import torch._dynamo  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - dynamo is optional for the judge itself
        notes.append(f"torch._dynamo unavailable: {exc}")
    return {k: v for k, v in modules.items() if v is not None}


def read_token() -> str:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        return sys.stdin.readline().strip()
    except (OSError, ValueError):
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.worker", description=__doc__.split("\n")[0])
    parser.add_argument("request", help="request JSON written by kernelwright.judge.api")
    parser.add_argument("--phase", choices=("evaluate", "compile"), default="evaluate")
    args = parser.parse_args(argv)
    timer = StageTimer()
    startup = process_age_s()
    if startup is not None:
        timer.seconds["startup"] = startup  # interpreter start and the judge's first imports
    token = read_token()
    request = JudgeRequest.load(args.request)
    writer = ResultWriter(request, token, timer)
    notes: list[str] = []
    with timer("imports"):
        modules = load_judge_modules(notes)
    if "env" in modules:  # the environment names no cache: the request does
        modules["env"].use_cache_root(request.config.get("cache_dir"))
    if args.phase == "compile":
        verdict = compile_only(request, writer, modules)
        verdict.stage_seconds.update(timer.rounded())
    else:
        verdict = evaluate(request, writer, modules, notes, timer)
    writer.write(verdict, complete=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # candidate threads must not keep the process alive
