"""Many problems as one job: `kernelwright optimize SUITE` (a folder, a list file, several folders).

    outcome = run_suite(problems, RunOptions(llm="openai:gpt-5", eval_mode="batch"), no_model=False)
    outcome = resume_suite("kw-runs/<suite-id>", RunOptions())

Every problem gets its own run (its own budget: the options' limits apply to each run) in the
suite's folder (store/suite.py). The runs go on at the same time and share what a suite shares:

- local evaluation: one judge pool (`JudgePool`), so evaluations of every problem queue for the
  same GPU lanes (one timing at a time per GPU, as for one run);
- `--eval batch`: ONE folder of requests (SUITE_DIR/evals); each request's name starts with its
  run's name and its priority is its number in the run, so a GPU runner with little time judges
  every problem's first candidates first. One `kernelwright judge --batch SUITE_DIR/evals` judges
  them all and one `--resume SUITE_DIR` continues every problem;
- `--llm exchange`: ONE folder of prompts (SUITE_DIR/exchange); each prompt names its problem in
  its messages, and its file name is the prompt's hash, so prompts of different problems never
  collide.

With agents the runs are coroutines of one event loop (at most SEARCH_PARALLEL at once); without an
LLM (the template tuner, or imported candidates) they are threads (at most AUTOTUNE_PARALLEL) over
the shared pool, one of which computes at a time while the others wait for their verdicts
(session.Shared). Ctrl-C ends every run as `interrupted`, resumable with the suite.
"""
from __future__ import annotations

import asyncio
import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelwright.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PAUSED
from kernelwright.judge.scheduling.pool import JudgePool, visible_gpus
from kernelwright.problem import ProblemError
from kernelwright.store.suite import (BATCH_DIR, EXCHANGE_DIR, SuiteEntry, SuiteError, SuiteManifest, new_manifest,
                                      read_manifest, write_manifest)

from . import modes
from .session import DEFAULT_WORKSPACE, INTERRUPTED_DETAIL, RunError, RunOptions, RunOutcome, Shared, prepare_run_dir
from .session import SearchSession

SEARCH_PARALLEL = 8  # agent runs going on at once (their evaluations share the judge pool)
AUTOTUNE_PARALLEL = 4  # template tuners at once (each waits for its evaluations)
Progress = Callable[[str, dict], None]  # (run name, snapshot)


@dataclass
class SuiteOutcome:
    suite_dir: Path
    manifest: SuiteManifest
    results: list[tuple[SuiteEntry, RunOutcome | Exception]] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """130 when interrupted; 75 when a run waits (answers, verdicts), so `--resume` goes on;
        1 when a run failed or could not start; else 0."""
        codes = [EXIT_FAILED if isinstance(o, Exception) else o.exit_code for _, o in self.results]
        for code in (EXIT_INTERRUPTED, EXIT_PAUSED, EXIT_FAILED):
            if code in codes:
                return code
        return EXIT_OK

    def pending_evals(self) -> list[Path]:
        return sorted({p for _, o in self.results if isinstance(o, RunOutcome) for p in o.pending_evals})

    def pending_prompts(self) -> list[Path]:
        return sorted({p for _, o in self.results if isinstance(o, RunOutcome) for p in o.pending_prompts})

    def resume_command(self) -> str:
        return f"kernelwright optimize --resume {self.suite_dir}"


def suite_dir_for(options: RunOptions, label: str, manifest: SuiteManifest) -> Path:
    """--run-dir names the suite's folder; else WORKSPACE/SUITE_ID (a new workspace is git-ignored)."""
    if options.run_dir:
        return Path(options.run_dir)
    return Path(options.workspace or DEFAULT_WORKSPACE) / manifest.id


def run_suite(problems: list[Path], options: RunOptions, no_model: bool, label: str = "",
              on_progress: Progress | None = None) -> SuiteOutcome:
    """Create the suite's folder and its runs, then run them all (see the module docstring)."""
    if not problems:
        raise RunError("the suite holds no problem files")
    mode = modes.new_mode(no_model)
    manifest = new_manifest(mode, options.eval_mode or "local", problems, label or problems[0].parent.name)
    suite_dir = suite_dir_for(options, label, manifest)
    if (suite_dir / "suite.json").exists() or (suite_dir / "run.sqlite").exists():
        raise RunError(f"{suite_dir} already holds a suite or a run; resume it with --resume {suite_dir}")
    prepare_run_dir(dataclasses.replace(options, run_dir=str(suite_dir) if options.run_dir else None), suite_dir)
    write_manifest(suite_dir, manifest)
    return _run(suite_dir, manifest, options, on_progress, new=True)


def resume_suite(suite_dir: str | Path, options: RunOptions, on_progress: Progress | None = None) -> SuiteOutcome:
    """Continue every run of the suite (a run that never started is started now)."""
    suite_dir = Path(suite_dir)
    try:
        manifest = read_manifest(suite_dir)
    except SuiteError as exc:
        raise RunError(str(exc)) from None
    return _run(suite_dir, manifest, options, on_progress, new=False)


def _run(suite_dir: Path, manifest: SuiteManifest, options: RunOptions, on_progress: Progress | None,
         new: bool) -> SuiteOutcome:
    outcome = SuiteOutcome(suite_dir, manifest)
    plans = [(entry, _entry_options(suite_dir, manifest, entry, options, new)) for entry in manifest.entries]
    if manifest.mode in (modes.AUTOTUNE, modes.IMPORT):
        outcome.results = _run_threads(plans, options, on_progress, manifest.mode)
    else:
        outcome.results = _run_sessions(plans, options, on_progress)
    changed = False
    for entry, result in outcome.results:  # a problem that could not start is remembered as such
        error = str(result) if isinstance(result, Exception) else ""
        if entry.error != error:
            entry.error, changed = error, True
    if changed:
        write_manifest(suite_dir, manifest)
    return outcome


def _entry_options(suite_dir: Path, manifest: SuiteManifest, entry: SuiteEntry, options: RunOptions,
                   new: bool) -> RunOptions:
    """The run options of one problem: its folder, the suite's shared batch and exchange folders."""
    run_dir = suite_dir / entry.name
    exchange = f"exchange:{(suite_dir / EXCHANGE_DIR).resolve()}"  # `--llm exchange`: the suite's folder
    llm = exchange if options.llm == "exchange" else options.llm
    roles = {role: exchange if spec == "exchange" else spec for role, spec in options.llm_roles.items()}
    shared: dict[str, Any] = {"batch_dir": f"../{BATCH_DIR}", "request_prefix": entry.request_prefix,
                              "llm": llm, "llm_roles": roles}
    if (run_dir / "run.sqlite").is_file():
        return dataclasses.replace(options, problem=None, resume=str(run_dir), run_dir=None, **shared)
    return dataclasses.replace(options, problem=entry.problem, resume=None, run_dir=str(run_dir),
                               eval_mode=options.eval_mode or manifest.eval, **shared)


# ---- runs with agents: coroutines of one event loop -------------------------------------------------


def _run_sessions(plans: list[tuple[SuiteEntry, RunOptions]], options: RunOptions,
                  on_progress: Progress | None) -> list[tuple[SuiteEntry, RunOutcome | Exception]]:
    results: dict[str, RunOutcome | Exception] = {}
    sessions: dict[str, SearchSession] = {}
    pool = _shared_pool(options)
    shared = Shared(pool=pool)
    try:
        for entry, run_options in plans:
            try:
                sessions[entry.name] = SearchSession(dataclasses.replace(run_options, shared=shared),
                                               _named(on_progress, entry.name))
            except (RunError, ProblemError) as exc:
                results[entry.name] = exc
        try:
            asyncio.run(_gather(sessions, results))
        except KeyboardInterrupt:
            for name, session in sessions.items():
                if name not in results:
                    results[name] = session.interrupted()
    finally:
        for session in sessions.values():
            session.close()
        if pool is not None:
            pool.close(wait=False)
    return [(entry, results[entry.name]) for entry, _ in plans if entry.name in results]


async def _gather(sessions: dict, results: dict) -> None:
    gate = asyncio.Semaphore(SEARCH_PARALLEL)

    async def one(name: str, session) -> None:
        async with gate:
            try:
                results[name] = await session.arun_to_end()
            except Exception as exc:  # noqa: BLE001 - one run's bug must not stop the others; it is reported
                results[name] = exc

    await asyncio.gather(*(one(name, s) for name, s in sessions.items()))


def _shared_pool(options: RunOptions):
    """One judge pool for every run that judges here (None for batch and Ray evaluation)."""
    mode = options.eval_mode or "local"
    if mode != "local":
        return None
    gpus = visible_gpus() if options.judge.device != "cpu" else ()
    return JudgePool(options.judge, gpus=gpus, cpu_workers=max(1, options.eval_workers))


def _named(on_progress: Progress | None, name: str) -> Callable[[dict], None] | None:
    if on_progress is None:
        return None
    return lambda snapshot: on_progress(name, snapshot)


# ---- runs without an LLM: template tuners in threads --------------------------------------------------


def _run_threads(plans: list[tuple[SuiteEntry, RunOptions]], options: RunOptions, on_progress: Progress | None,
                 mode: str = modes.AUTOTUNE) -> list[tuple[SuiteEntry, RunOutcome | Exception]]:
    """Template tuners (or runs of imported candidates) in threads over one judge pool."""
    runner = modes.runner(mode)
    pool = _shared_pool(dataclasses.replace(options, eval_mode=options.eval_mode or "local"))
    shared = Shared(pool=pool, gate=threading.Lock())

    def one(entry: SuiteEntry, run_options: RunOptions) -> RunOutcome | Exception:
        with shared.gate:
            if shared.stop.is_set():
                return _not_started(run_options, entry)
            try:
                return runner(dataclasses.replace(run_options, shared=shared), _named(on_progress, entry.name))
            except (RunError, ProblemError) as exc:
                return exc
            except Exception as exc:  # noqa: BLE001 - one run's bug must not stop the others; it is reported
                return RunError(f"{type(exc).__name__}: {exc}")

    executor = ThreadPoolExecutor(max_workers=AUTOTUNE_PARALLEL, thread_name_prefix="kw-suite")
    futures = [(entry, executor.submit(one, entry, run_options)) for entry, run_options in plans]
    try:
        results = [(entry, future.result()) for entry, future in futures]
    except KeyboardInterrupt:
        shared.stop.set()  # each run stops before its next evaluation; the ones being judged finish
        results = [(entry, future.result()) for entry, future in futures]
    finally:
        executor.shutdown(wait=True)
        if pool is not None:
            pool.close(wait=False)
    return results


def _not_started(run_options: RunOptions, entry: SuiteEntry) -> RunOutcome:
    run_dir = Path(run_options.resume or run_options.run_dir or entry.name)
    return RunOutcome(entry.name, run_dir, "interrupted", f"{INTERRUPTED_DETAIL} before this problem started")
