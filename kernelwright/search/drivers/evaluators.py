"""Answer evaluation asks: in this process's pool of judge workers, or through a batch folder.

Local: every candidate is written to RUN_DIR/candidates/<id>.py (for people to read) and judged in a
fresh process (kernelwright.judge.judge). Both ways the judge gets texts (the problem's source as
stored with the run, the candidate's code under its id), so a verdict, and every prompt quoting
it, is the same whether judged here or elsewhere, and names no folder of this machine. Local
evaluations run one at a time per GPU (timings taken side by side on one GPU disturb each other).

Batch: the candidate becomes a request in RUN_DIR/evals/ for `kernelwright judge --batch` to
evaluate elsewhere; until its verdict file appears the ask is pending and the run pauses.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.verdict import Verdict

from ..asks import Answer, EvaluationAsk
from ..results import AskFailure, EvalResult
from .loop import Pending


def candidate_file(run_dir: Path, candidate_id: str, code: str) -> Path:
    path = Path(run_dir) / "candidates" / f"{candidate_id}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != code:
        path.write_text(code)
    return path


def verdict_answer(verdict: Verdict) -> Answer:
    return Answer(EvalResult.from_verdict(verdict), verdict_json=verdict.to_json(indent=None))


class LocalEvaluator:
    """Judges candidates in fresh processes, one at a time per lane.

    A lane is one GPU (its CUDA_VISIBLE_DEVICES) so that two timings never share a device; on a
    CPU-only machine there are `workers` lanes (default 1). The judge pool's batch API takes a
    fixed list of jobs, while asks arrive one by one, hence these lanes around `judge()`.
    """

    def __init__(self, problem_source: str, problem_name: str, config: JudgeConfig, run_dir: str | Path,
                 workers: int = 1):
        self.problem_source = problem_source
        self.problem_name = problem_name
        self.config = config
        self.run_dir = Path(run_dir)
        self.lane_envs = _lanes(config, workers)
        self._lanes: asyncio.Queue | None = None

    async def answer(self, ask: EvaluationAsk) -> Answer:
        from kernelwright.judge.api import SourceText, judge

        candidate_file(self.run_dir, ask.candidate_id, ask.code)  # for people; the judge gets the text
        problem = SourceText(self.problem_source, name=f"{self.problem_name}.py")
        source = SourceText(ask.code, name=ask.candidate_id)
        if self._lanes is None:
            self._lanes = asyncio.Queue()
            for env in self.lane_envs:
                self._lanes.put_nowait(env)
        env = await self._lanes.get()
        try:
            verdict = await asyncio.to_thread(judge, problem, source, self.config, env=env or None)
        except Exception as exc:  # the judge promises not to raise; if it does, say so
            return Answer(AskFailure("JudgeError", f"{type(exc).__name__}: {exc}"))
        finally:
            self._lanes.put_nowait(env)
        return verdict_answer(verdict)


def _lanes(config: JudgeConfig, workers: int) -> list[dict[str, str]]:
    from kernelwright.judge.pool import visible_gpus

    gpus = visible_gpus() if config.device != "cpu" else ()
    if gpus:
        return [{"CUDA_VISIBLE_DEVICES": str(gpu)} for gpu in gpus]
    return [{} for _ in range(max(1, workers))]


class BatchEvaluator:
    """Requests carry the problem's source text, not its path: the folder is judged elsewhere."""

    def __init__(self, problem_source: str, problem_name: str, config: JudgeConfig, run_dir: str | Path):
        self.problem_source = problem_source
        self.problem_name = problem_name
        self.config = config
        self.run_dir = Path(run_dir)
        self.folder = self.run_dir / "evals"

    async def answer(self, ask: EvaluationAsk) -> Answer:
        from kernelwright.judge import batch
        from kernelwright.judge.api import SourceText

        candidate_file(self.run_dir, ask.candidate_id, ask.code)
        verdict = _find_verdict(batch.read_verdicts(self.folder), ask.candidate_id) \
            if self.folder.is_dir() else None
        if verdict is not None:
            return verdict_answer(verdict)
        request = self.folder / f"{ask.candidate_id}{batch.REQUEST_SUFFIX}"
        if not request.is_file():  # asked again after a resume: the request is already there
            problem = SourceText(self.problem_source, name=f"{self.problem_name}.py")
            request = batch.write_request(self.folder, ask.candidate_id, problem, ask.code, self.config)
        return _raise_pending(self.folder, ask.candidate_id, request)


def _find_verdict(verdicts: dict[str, Verdict], name: str) -> Verdict | None:
    return verdicts.get(name)


def _raise_pending(folder: Path, name: str, request: Path) -> Answer:
    raise Pending("evaluation", [Path(request)], f"evaluation of {name} waits for a verdict in {folder}")
