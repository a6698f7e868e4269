"""Answer evaluation asks: in this process's pool of judge workers, or through a batch folder.

Local: every candidate is written to RUN_DIR/candidates/<id>.py (for people to read) and judged in a
fresh process through the judge's pool (kernelwright.judge.scheduling.pool.JudgePool.ajudge). Both ways the
judge gets texts (the problem's source as stored with the run, the candidate's code under its id),
so a verdict, and every prompt quoting it, is the same whether judged here or elsewhere, and names
no folder of this machine. Local evaluations may check several candidates at once on one GPU; the
pool's device lock lets only one at a time take its timing (side by side they disturb each other).

A verdict that failed because of the machine (Triton missing, no compiler: judge.preflight) is
not an answer about the candidate: the run stops (`Fatal`) with the cause, and the ask stays open
for a resume once the machine is fixed.

The tuning step's asks are answered here too (drivers/tune_asks.py): a `SweepAsk` is one judge
evaluation of many instances (the pool's `JudgeJob.sweep`, a batch request's `sweep`), a `SeedsAsk`
a read of the seed cache. Every evaluator sweeps (local, batch, Ray).

Batch: the candidate becomes a request in RUN_DIR/evals/ for `kernelwright judge --batch` to
evaluate elsewhere; until its verdict file appears the ask is pending and the run pauses. The runs of
a suite share one folder (SUITE_DIR/evals): each request's name starts with its run's name, and its
priority (the candidate's number) lets the batch runner judge every problem's first candidates
before anyone's later ones.
"""
from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.preflight import environment_error
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling import batch_folder
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool, visible_gpus
from kernelwright.judge.verdict import Verdict

from ..asks import Answer, EvaluationAsk, SeedsAsk, SweepAsk
from ..results import AskFailure, EvalResult
from .loop import Fatal, Pending
from .tune_asks import record_verdict_seed, seeds_answer, sweep_answer, sweep_instances


def candidate_file(run_dir: Path, candidate_id: str, code: str) -> Path:
    path = Path(run_dir) / "candidates" / f"{candidate_id}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != code:
        path.write_text(code)
    return path


def verdict_answer(verdict: Verdict) -> Answer:
    return Answer(EvalResult.from_verdict(verdict), verdict_json=verdict.to_json(indent=None))


class LocalEvaluator:
    """Judges candidates through a `JudgePool` as the asks arrive, one fresh process each.

    On a GPU machine the pool checks several candidates at once per GPU and lets one at a time
    take the timing (the device lock keeps timings apart); on a CPU-only machine there are
    `workers` evaluations at once (default 1).
    """

    def __init__(self, problem_source: str, problem_name: str, config: JudgeConfig, run_dir: str | Path,
                 workers: int = 1, pool=None):
        self.problem_source = problem_source
        self.problem_name = problem_name
        self.config = config
        self.run_dir = Path(run_dir)
        self.workers = max(1, workers)
        self._pool = pool  # a suite's runs share one pool (each job carries its run's judge config)

    def pool(self):
        if self._pool is None:
            gpus = visible_gpus() if self.config.device != "cpu" else ()
            self._pool = JudgePool(self.config, gpus=gpus, cpu_workers=self.workers)
        return self._pool

    async def answer(self, ask: EvaluationAsk | SweepAsk | SeedsAsk) -> Answer:
        if isinstance(ask, SeedsAsk):
            return seeds_answer(ask)
        problem = SourceText(self.problem_source, name=f"{self.problem_name}.py")
        try:
            if isinstance(ask, SweepAsk):
                what = f"the sweep {ask.id} of {ask.of}"
                job = JudgeJob(problem, SourceText(ask.instances[0].source, name=f"{ask.of}_sweep"), self.config,
                               name=ask.id, sweep=sweep_instances(ask))
                verdict = await asyncio.wrap_future(self.pool().submit_job(job))
            else:
                what = ask.candidate_id
                candidate_file(self.run_dir, ask.candidate_id, ask.code)  # for people; the judge gets the text
                config = dataclasses.replace(self.config, profile=True) if ask.profile else self.config
                verdict = await self.pool().ajudge(problem, SourceText(ask.code, name=ask.candidate_id), config)
        except Exception as exc:  # noqa: BLE001 -- the judge promises not to raise; if it does, say so
            return Answer(AskFailure("JudgeError", f"{type(exc).__name__}: {exc}"))
        machine = environment_error(verdict)
        if machine:  # not the candidate's fault, and every later candidate would hit it too
            raise Fatal(f"environment error while judging {what} (not the candidate's fault): {machine}")
        if isinstance(ask, SweepAsk):
            return sweep_answer(ask, verdict)
        record_verdict_seed(ask, verdict)
        return verdict_answer(verdict)


class BatchEvaluator:
    """Requests carry the problem's source text, not its path: the folder is judged elsewhere.
    `folder` defaults to RUN_DIR/evals; `prefix` starts every request's name (a suite's shared folder)."""

    def __init__(self, problem_source: str, problem_name: str, config: JudgeConfig, run_dir: str | Path,
                 folder: str | Path | None = None, prefix: str = ""):
        self.problem_source = problem_source
        self.problem_name = problem_name
        self.config = config
        self.run_dir = Path(run_dir)
        self.folder = Path(folder) if folder is not None else self.run_dir / "evals"
        self.prefix = prefix

    async def answer(self, ask: EvaluationAsk | SweepAsk | SeedsAsk) -> Answer:
        if isinstance(ask, SeedsAsk):
            return seeds_answer(ask)
        sweep = isinstance(ask, SweepAsk)
        if sweep:  # named by its ask: stable across resumes, like a candidate's id
            name, code, priority = f"{self.prefix}{ask.of}_sweep_{ask.id}", ask.instances[0].source, ask.of
        else:
            candidate_file(self.run_dir, ask.candidate_id, ask.code)
            name, code, priority = f"{self.prefix}{ask.candidate_id}", ask.code, ask.candidate_id
        verdict = _find_verdict(self.folder, name)
        if verdict is not None:
            if sweep:
                return sweep_answer(ask, verdict)
            record_verdict_seed(ask, verdict)
            return verdict_answer(verdict)
        request = self.folder / f"{name}{batch_folder.REQUEST_SUFFIX}"
        if not request.is_file():  # asked again after a resume: the request is already there
            problem = SourceText(self.problem_source, name=f"{self.problem_name}.py")
            request = batch_folder.write_request(self.folder, name, problem, code, self.config,
                                          profile=not sweep and ask.profile, priority=candidate_number(priority),
                                          sweep=sweep_instances(ask) if sweep else None)
        return _raise_pending(self.folder, name, request)


def candidate_number(candidate_id: str) -> int:
    """c12 -> 12: a run's earlier candidates are judged first when several runs share a folder."""
    digits = "".join(ch for ch in candidate_id if ch.isdigit())
    return int(digits) if digits else 0


def _find_verdict(folder: Path, name: str) -> Verdict | None:
    """The verdict file of one request, when it is there and readable."""
    path = folder / f"{name}{batch_folder.VERDICT_SUFFIX}"
    if not path.is_file():
        return None
    try:
        return Verdict.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None


def _raise_pending(folder: Path, name: str, request: Path) -> Answer:
    raise Pending("evaluation", [Path(request)], f"evaluation of {name} waits for a verdict in {folder}")
