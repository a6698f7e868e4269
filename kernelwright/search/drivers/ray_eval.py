"""Answer evaluation asks on a Ray cluster: `--eval ray` or `--eval ray:ADDRESS`.

`ray` alone connects to $RAY_ADDRESS, else to a cluster started on this machine with `ray start`,
else starts a local Ray instance; `ray:ADDRESS` names the cluster ("auto", "HOST:PORT",
"ray://HOST:PORT"). The judge gets texts, as with a local pool or a batch folder, so the verdict is
the same wherever it was made; it also says where (`environment["judged_on"]`).

Each verdict is persisted by the driver loop before the engine hears it, as for local evaluations.
An evaluation whose Ray actor is lost is judged again elsewhere (`RayJudgePool`); when every
attempt is lost the ask fails as a judge failure (`JudgeLost`), which the engine never blames on
the code. A cluster that cannot be reached stops the run (`Fatal`): resume it once the cluster is
back, nothing stored is lost.
"""
from __future__ import annotations

from pathlib import Path

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.scheduling.node import NodeJob

from ..asks import Answer, EvaluationAsk, SeedsAsk, SweepAsk
from ..results import AskFailure
from .evaluators import candidate_file, verdict_answer
from .tune_asks import record_verdict_seed, seeds_answer, sweep_answer, sweep_instances
from .loop import Fatal
from .ray_pool import INSTALL_HINT, JudgeLost, RayJudgePool, RayOptions, RayUnavailable, ray_installed

MODE = "ray"
_POOLS: dict[tuple, RayJudgePool] = {}  # one per process and cluster: a suite's runs share the actors


def is_ray_mode(mode: str | None) -> bool:
    return mode == MODE or bool(mode and mode.startswith(MODE + ":"))


def ray_address(mode: str) -> str | None:
    """The cluster address in `ray:ADDRESS`; None for plain `ray`."""
    return (mode.split(":", 1)[1] or None) if ":" in mode else None


def missing_ray_message(mode: str | None) -> str | None:
    """What to do when `--eval ray` is asked for and Ray is not installed, else None."""
    if is_ray_mode(mode) and not ray_installed():
        return f"--eval {mode} needs Ray, which is not installed: {INSTALL_HINT} (or pip install ray)"
    return None


def shared_pool(options: RayOptions) -> RayJudgePool:
    pool = _POOLS.get(options.key())
    if pool is None or pool.start_failed:  # a new run tries a cluster that failed an earlier one again
        pool = _POOLS[options.key()] = RayJudgePool(options)
    return pool


class RayEvaluator:
    """Judges candidates on Ray actors as the asks arrive (see the module docstring)."""

    def __init__(self, problem_source: str, problem_name: str, config: JudgeConfig, run_dir: str | Path,
                 options: RayOptions):
        self.problem_source = problem_source
        self.problem_name = problem_name
        self.config = config
        self.run_dir = Path(run_dir)
        self.pool = shared_pool(options)

    @classmethod
    def from_mode(cls, mode: str, problem_source: str, problem_name: str, config: JudgeConfig,
                  run_dir: str | Path, workers: int = 1) -> "RayEvaluator":
        """`workers` is the number of judge actors on a cluster without GPUs (one per GPU otherwise)."""
        options = RayOptions(address=ray_address(mode), actors=None if workers <= 1 else workers)
        return cls(problem_source, problem_name, config, run_dir, options)

    async def answer(self, ask: EvaluationAsk | SweepAsk | SeedsAsk) -> Answer:
        if isinstance(ask, SeedsAsk):
            return seeds_answer(ask)
        if isinstance(ask, SweepAsk):  # one evaluation of many instances on the node (NodeJob.sweep)
            job = NodeJob(self.problem_source, f"{self.problem_name}.py", ask.instances[0].source,
                          f"{ask.of}_sweep", self.config.to_dict(), sweep=sweep_instances(ask))
        else:
            candidate_file(self.run_dir, ask.candidate_id, ask.code)  # for people; the judge gets the text
            job = NodeJob(self.problem_source, f"{self.problem_name}.py", ask.code, ask.candidate_id,
                          self.config.to_dict())
        try:
            verdict = await self.pool.ajudge(job)
        except JudgeLost as exc:
            return Answer(AskFailure("JudgeLost", str(exc)))
        except RayUnavailable as exc:
            raise Fatal(f"{exc}. Nothing is lost: fix the cluster, then resume with --resume") from None
        except Exception as exc:  # noqa: BLE001 - the judge promises not to raise; if it does, say so
            return Answer(AskFailure("JudgeError", f"{type(exc).__name__}: {exc}"))
        if isinstance(ask, SweepAsk):
            return sweep_answer(ask, verdict)
        record_verdict_seed(ask, verdict)
        return verdict_answer(verdict)
