"""A run from start (or resume) to done or paused: the edge where the pure engine meets the world.

    outcome = run_optimization(RunOptions(problem="problem.py", llm="openai:gpt-5"))
    outcome = run_optimization(RunOptions(resume="kw-runs/20250101-120000-problem-1a2b"))

Starting: describe the problem, create RUN_DIR with its database, store the settings.
Resuming: rebuild the engine from the stored settings and replay the journal (every result, in
the order it was told); asks left without a result come out of the engine again and are asked
again (an exchange prompt or a batch request is found by its hash or name, not re-created).
"""
from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from kernelwright.judge.config import JudgeConfig
from kernelwright.llm.errors import EXIT_ANSWER_PENDING, LLMError

from ..asks import result_from_dict
from ..budget import Limits
from ..core import AGENT_NAMES, Engine, EngineError
from ..problem_info import ProblemInfo, describe_problem
from ..settings import Settings
from .loop import DriveOutcome, Fatal, Mirror, ReplayDiverged, drive, node_row

DEFAULT_WORKSPACE = Path("kw-runs")
BEST_FILE = "best_model_new.py"
#: exit status of a run that paused (exchange answers or batch verdicts pending); the llm layer's
#: EX_TEMPFAIL, so every "try again later" in kernelwright reads the same
EXIT_PAUSED = EXIT_ANSWER_PENDING
EXIT_OK, EXIT_FAILED = 0, 1


class RunError(RuntimeError):
    """The run cannot start or resume; the message says why and what to do."""


@dataclass
class RunOptions:
    problem: str | None = None
    resume: str | None = None  # RUN_DIR of a run to continue
    llm: str | None = None  # default spec; "exchange" alone means exchange:RUN_DIR/exchange
    llm_roles: dict[str, str] = field(default_factory=dict)
    config_file: str | None = None  # TOML with [llm], [optimize], [judge] tables
    backend: str = "triton"
    settings: Settings = field(default_factory=Settings)
    limits: Limits = field(default_factory=Limits)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    overrides: dict[str, Any] = field(default_factory=dict)  # problem size overrides
    run_dir: str | None = None
    workspace: str = str(DEFAULT_WORKSPACE)
    eval_mode: str | None = None  # "local" or "batch"; on resume None keeps the stored one
    eval_workers: int = 1
    skill_dirs: list[str] = field(default_factory=list)
    seed: int = 0


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    status: str  # "done", "paused", "failed"
    detail: str = ""
    best_id: str | None = None
    best_speedup: float | None = None
    best_path: Path | None = None
    pending_prompts: list[Path] = field(default_factory=list)
    pending_evals: list[Path] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"done": EXIT_OK, "paused": EXIT_PAUSED}.get(self.status, EXIT_FAILED)


def new_run_id(problem_name: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in problem_name)[:40]
    return f"{stamp}-{safe}-{secrets.token_hex(2)}"


def _llm_specs(options: RunOptions, run_dir: Path) -> tuple[str | None, dict[str, str]]:
    def fix(spec: str | None) -> str | None:
        return f"exchange:{run_dir.resolve() / 'exchange'}" if spec == "exchange" else spec

    return fix(options.llm), {role: fix(spec) for role, spec in options.llm_roles.items()}


class Session:
    """One process's work on one run."""

    def __init__(self, options: RunOptions, on_progress: Callable[[dict], None] | None = None):
        from kernelwright.store import RunStore

        self.options = options
        self.on_progress = on_progress
        if options.resume:
            self.run_dir = Path(options.resume)
            if not (self.run_dir / "run.sqlite").is_file():
                raise RunError(f"{self.run_dir} holds no run database (run.sqlite); nothing to resume")
            self.store = RunStore.in_dir(self.run_dir, create=False)
            self.run = self.store.run()
            self.run_id = self.run["id"]
            self.stored = self.run["settings"]
            self._check_problem_unchanged()
        else:
            self._create(RunStore)

    # ---- creating and reopening --------------------------------------------------------------

    def _create(self, store_cls) -> None:
        options = self.options
        if not options.problem:
            raise RunError("name a problem file to optimize (or --resume RUN_DIR)")
        info = describe_problem(options.problem, options.backend, options.overrides, options.judge.device)
        self.run_id = new_run_id(info.name)
        self.run_dir = Path(options.run_dir) if options.run_dir else Path(options.workspace) / self.run_id
        if (self.run_dir / "run.sqlite").exists():
            raise RunError(f"{self.run_dir} already holds a run; resume it with --resume {self.run_dir}")
        judge = dataclasses.replace(options.judge, overrides={**options.judge.overrides, **options.overrides})
        llm, roles = _llm_specs(options, self.run_dir)
        self.stored = {"search": options.settings.to_dict(), "limits": options.limits.to_dict(),
                       "seed": options.seed, "problem": info.to_dict(), "judge": judge.to_dict(),
                       "llm": {"default": llm, "roles": roles, "config_file": options.config_file},
                       "eval": options.eval_mode or "local", "eval_workers": options.eval_workers,
                       "skill_dirs": [str(Path(d).resolve()) for d in options.skill_dirs]}
        self.store = store_cls.in_dir(self.run_dir)
        self.store.create_run(self.run_id, problem_path=info.path, problem_name=info.name,
                              problem_hash=info.source_hash, problem_source=info.source,
                              settings=self.stored)
        self.run = self.store.run(self.run_id)

    def _check_problem_unchanged(self) -> None:
        path = Path(self.run["problem_path"])
        if path.is_file() and path.read_text() != self.run["problem_source"]:
            raise RunError(f"{path} changed since run {self.run_id} started; its verdicts would not "
                           "compare. Start a new run, or restore the file.")
        if not path.is_file():
            raise RunError(f"the run's problem file {path} is gone; restore it to resume")

    # ---- the pieces -----------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return Settings.from_dict(self.stored["search"])

    @property
    def problem(self) -> ProblemInfo:
        return ProblemInfo.from_dict(self.stored["problem"])

    def _skills(self):
        from kernelwright.memory.skills import SkillLibrary

        library = SkillLibrary.load(self.stored.get("skill_dirs") or [], encoder=None)
        return lambda query, conditions, k: library.retrieve(query, conditions, k)

    def build_engine(self) -> Engine:
        """A fresh engine with the stored settings, with every stored tell replayed in order."""
        stored_limits = Limits.from_dict(self.stored["limits"])
        engine = Engine(self.problem, self.settings.strategy, stored_limits, self.settings,
                        rng_seed=int(self.stored.get("seed", 0)), skills=self._skills())
        for entry in self.store.journal(self.run_id):
            try:
                if entry.kind == "limits":
                    engine.set_limits(Limits.from_dict(entry.payload), entry.elapsed_s)
                else:
                    engine.tell(entry.ask_id, result_from_dict(entry.payload), entry.elapsed_s)
            except EngineError as exc:
                raise ReplayDiverged(f"replaying run {self.run_id} failed at journal entry {entry.seq}: "
                                     f"{exc}. The run was made by another version of kernelwright.") from None
        engine.take_changed()
        return engine

    def _apply_new_limits(self, engine: Engine, elapsed: float) -> None:
        current = engine.budget.limits
        wanted = current.merged(self.options.limits) if self.options.resume else current
        if wanted != current:
            self.store.save_limits(self.run_id, wanted.to_dict(), elapsed)
            engine.set_limits(wanted, elapsed)

    def _router(self):
        from kernelwright.llm.config import LLMConfig
        from kernelwright.llm.router import Router

        stored = self.stored["llm"]
        llm, roles = _llm_specs(self.options, self.run_dir)
        default = llm or stored.get("default")
        roles = {**(stored.get("roles") or {}), **roles}
        config = LLMConfig.load(self.options.config_file or stored.get("config_file"))
        if not (default or roles or config.default or config.roles):
            raise RunError("no LLM configured: pass --llm SPEC (e.g. openai:gpt-5, exchange, "
                           "replay:CASSETTE.jsonl) or set KERNELWRIGHT_LLM")
        if default != stored.get("default") or roles != (stored.get("roles") or {}):
            self.store.add_event(self.run_id, "llm", {"default": default, "roles": roles})
        router = Router(config, default, role_specs=roles)
        if Limits.from_dict(self.stored["limits"]).merged(self.options.limits).max_usd is not None:
            for role in AGENT_NAMES:  # a dollar budget over an unpriced model would never stop
                provider = router.provider_for(role)
                if provider.price is None:
                    raise RunError(f"a dollar budget is set but {provider.spec} (the {role}) has no "
                                   f'price: add [llm.prices."{provider.model}"] to the config')
        return router

    def _evaluator(self):
        from .evaluators import BatchEvaluator, LocalEvaluator

        mode = self.options.eval_mode or self.stored.get("eval", "local")
        judge = JudgeConfig.from_dict(self.stored["judge"])
        if mode == "batch":
            return BatchEvaluator(self.run["problem_source"], self.run["problem_name"], judge, self.run_dir)
        if mode != "local":
            raise RunError(f"--eval must be local or batch, not {mode!r}")
        return LocalEvaluator(self.run["problem_source"], self.run["problem_name"], judge, self.run_dir,
                              int(self.stored.get("eval_workers", 1)))

    # ---- running ----------------------------------------------------------------------------

    def run_to_end(self) -> RunOutcome:
        from .completions import RouterAnswerer

        engine = self.build_engine()
        base = self.store.last_elapsed(self.run_id)
        started = time.monotonic()

        def clock() -> float:
            return base + time.monotonic() - started

        self._apply_new_limits(engine, base)
        mirror = Mirror(self.store, self.run_id, self.settings.objective)
        self.store.upsert_candidates(self.run_id, [node_row(n, self.settings.objective) for n in engine.tree])
        try:
            router = self._router()
        except LLMError as exc:
            raise RunError(str(exc)) from None
        completions = RouterAnswerer(router, self.run_id, self.store)
        evaluations = self._evaluator()
        self.store.update_run(self.run_id, status="running", detail=None)
        if self.on_progress:
            self.on_progress(engine.snapshot())
        try:
            outcome = asyncio.run(self._drive(engine, mirror, completions, evaluations, clock, router))
        except Fatal as exc:
            return self._finish(engine, "failed", str(exc))
        except KeyboardInterrupt:
            self.store.update_run(self.run_id, status="interrupted", detail="stopped by the user")
            raise
        except Exception as exc:  # a bug: leave the run marked (it stays resumable), then surface it
            self.store.update_run(self.run_id, status="failed", detail=f"{type(exc).__name__}: {exc}")
            raise
        return self._conclude(engine, outcome)

    async def _drive(self, engine, mirror, completions, evaluations, clock, router) -> DriveOutcome:
        try:
            return await drive(engine, mirror, completions=completions, evaluations=evaluations,
                               clock=clock, on_progress=self.on_progress)
        finally:
            await router.aclose()

    def _conclude(self, engine: Engine, outcome: DriveOutcome) -> RunOutcome:
        prompts = sorted({p for x in outcome.pending_of("answer") for p in x.paths})
        evals = sorted({p for x in outcome.pending_of("evaluation") for p in x.paths})
        if outcome.pending:
            parts = []
            if prompts:
                parts.append(f"{len(prompts)} prompt(s) wait for answers in {prompts[0].parent}")
            if evals:
                parts.append(f"{len(evals)} evaluation(s) pending in {evals[0].parent}: run "
                             f"`kernelwright judge --batch {evals[0].parent}` (or `python -m "
                             f"kernelwright.judge.batch {evals[0].parent}`) where the GPU is")
            detail = "; ".join(parts) + f". Then: kernelwright optimize --resume {self.run_dir}"
            result = self._finish(engine, "paused", detail)
            result.pending_prompts, result.pending_evals = prompts, evals
            return result
        return self._finish(engine, "done", engine.stop_reason or "finished")

    def _finish(self, engine: Engine, status: str, detail: str) -> RunOutcome:
        from kernelwright.report.best import write_best

        snapshot = engine.snapshot()
        self.store.update_run(self.run_id, status=status, detail=detail, spend=snapshot["spend"])
        best = engine.best()
        best_path = None
        if best is not None:
            best_path = write_best(self.store, self.run_id, self.run_dir / BEST_FILE)
        return RunOutcome(self.run_id, self.run_dir, status, detail, best.id if best else None,
                          snapshot["best_speedup"], best_path, snapshot=snapshot)

    def close(self) -> None:
        self.store.close()


def run_optimization(options: RunOptions, on_progress: Callable[[dict], None] | None = None) -> RunOutcome:
    if options.resume:
        from .autotune import is_autotune_run, run_autotune

        if is_autotune_run(options.resume):  # a run without an LLM resumes as it started
            return run_autotune(options, on_progress)
    session = Session(options, on_progress)
    try:
        return session.run_to_end()
    finally:
        session.close()
