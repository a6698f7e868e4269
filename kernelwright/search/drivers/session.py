"""A run from start (or resume) to done or paused: the edge where the pure engine meets the world.

    outcome = run_search(RunOptions(problem="problem.py", llm="openai:gpt-5"))
    outcome = run_search(RunOptions(resume="kw-runs/20250101-120000-problem-1a2b"))

(`modes.run_optimization` takes any run to the driver of its mode: this one for the agents.)

Starting: describe the problem, check the LLM configuration (a bad spec or a missing key stops
here, before any folder exists), create RUN_DIR with its database, store the settings.
Resuming: rebuild the engine from the stored settings and replay the journal (every result, in
the order it was told); asks left without a result come out of the engine again and are asked
again (an exchange prompt or a batch request is found by its hash or name, not re-created). A
batch run then takes the verdicts judged again after a system error (`judge --batch
--retry-errors`) in place of the ones it stored (rejudged.py).
A run made without an LLM (the template autotuner, `autotune.py`) resumes through its own driver
(modes.py chooses it).

The process working on a run holds RUN_DIR/run.lock (`store.RunLock`). Ctrl-C or SIGTERM ends the
run as `interrupted`, with the best candidate so far written and a resume hint; after `kill -9` the
lock is free while the status still says running, which `runs list/show` and a resume read as
interrupted. The best candidate file is rewritten whenever the best changes, so it is there
however the process ends.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from kernelwright.judge.config import JudgeConfig
from kernelwright.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PAUSED
from kernelwright.judge.request import SourceText
from kernelwright.llm.config import LLMConfig
from kernelwright.llm.errors import ConfigError, LLMError
from kernelwright.llm.router import Router
from kernelwright.memory.ranking import rank_skills
from kernelwright.memory.skills import SkillLibrary
from kernelwright.report.best import write_best
from kernelwright.store import RunBusy, RunLock, RunStore

from ..asks import result_from_dict
from ..budget import Limits
from ..core import AGENT_NAMES, Engine, EngineError
from ..problem_info import ProblemInfo, describe_problem
from ..settings import Settings
from . import rejudged, targets
from .completions import RouterAnswerer
from .errors import RunError
from .evaluators import BatchEvaluator, LocalEvaluator
from .loop import DriveOutcome, Fatal, Mirror, ReplayDiverged, drive, node_row
from .ray_eval import RayEvaluator, is_ray_mode, missing_ray_message
from .seed_start import announce, judged_start, stored_start, write_start

DEFAULT_WORKSPACE = Path("kw-runs")
BEST_FILE = "best_model_new.py"
# written into a workspace folder the first time a run is made there: run folders stay out of git
WORKSPACE_GITIGNORE = "# kernelwright run folders (databases, candidates): not for version control\n*\n"
INTERRUPTED_DETAIL = "stopped by the user (Ctrl-C or SIGTERM)"


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
    eval_mode: str | None = None  # "local", "batch", "ray[:ADDRESS]"; on resume None keeps the stored one
    eval_workers: int = 1
    skill_dirs: list[str] = field(default_factory=list)
    prompt_dirs: list[str] = field(default_factory=list)  # [optimize] prompts: prompt files overriding the built-ins
    seed: int = 0
    target: str | None = None  # --target: a known GPU's name or a device file; else learned (see targets.py)
    # a suite's runs share one batch folder (relative to the run folder) and one judge pool
    batch_dir: str | None = None  # default: RUN_DIR/evals
    request_prefix: str = ""  # starts the name of every batch request of this run
    shared: "Shared | None" = None  # what a suite's runs share in this process; not stored


@dataclass
class Shared:
    """What the runs of a suite share in one process (never stored): one judge pool, the Ctrl-C
    signal of runs in threads, and the gate that lets one of those threads compute at a time
    (they overlap only while waiting for the judge: `waiting()`). One at a time because several
    threads parsing Python at once trip a CPython 3.11 bug ("AST constructor recursion depth
    mismatch"), and torch.export is not thread-safe; the GIL allowed no more anyway."""

    pool: Any = None  # a JudgePool (local evaluation), or None
    stop: threading.Event = field(default_factory=threading.Event)
    gate: Any = None  # a threading.Lock held by the thread that computes

    @contextlib.contextmanager
    def waiting(self):
        """Let the other runs compute while this one waits for verdicts."""
        if self.gate is None:
            yield
            return
        self.gate.release()
        try:
            yield
        finally:
            self.gate.acquire()


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    status: str  # "done", "paused", "failed", "interrupted"
    detail: str = ""
    best_id: str | None = None
    best_speedup: float | None = None
    best_path: Path | None = None
    pending_prompts: list[Path] = field(default_factory=list)
    pending_evals: list[Path] = field(default_factory=list)
    snapshot: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"done": EXIT_OK, "paused": EXIT_PAUSED, "interrupted": EXIT_INTERRUPTED}.get(self.status, EXIT_FAILED)

    def to_dict(self) -> dict[str, Any]:
        """For `--json`: paths as strings, the exit code included."""
        return {"run_id": self.run_id, "run_dir": str(self.run_dir), "status": self.status, "detail": self.detail,
                "best_id": self.best_id, "best_speedup": self.best_speedup,
                "best_path": str(self.best_path) if self.best_path else None,
                "pending_prompts": [str(p) for p in self.pending_prompts],
                "pending_evals": [str(p) for p in self.pending_evals],
                "resume": resume_command(self.run_dir) if self.status in ("paused", "interrupted", "failed") else None,
                "exit_code": self.exit_code, "spend": self.snapshot.get("spend"), "tuning": self.snapshot.get("tuning"),
                "candidates": self.snapshot.get("candidates"), "passing": self.snapshot.get("passing")}


def resume_command(run_dir: str | Path) -> str:
    return f"kernelwright optimize --resume {run_dir}"


def new_run_dir(options: "RunOptions", run_id: str) -> Path:
    """--run-dir, else WORKSPACE/RUN_ID; RunError when a run is already there. Not created yet:
    `claim_run_dir` does that once the run is ready to start (one home for both drivers)."""
    run_dir = Path(options.run_dir) if options.run_dir else Path(options.workspace) / run_id
    if (run_dir / "run.sqlite").exists():
        raise RunError(f"{run_dir} already holds a run; resume it with --resume {run_dir}")
    return run_dir


def claim_run_dir(options: "RunOptions", run_dir: Path):
    """Create the new run's folder and hold its lock (store.RunLock, released by the caller)."""
    prepare_run_dir(options, run_dir)
    return hold_run(run_dir)


def prepare_run_dir(options: "RunOptions", run_dir: Path) -> None:
    """Create the run's folder; a new workspace folder is git-ignored (a .gitignore inside it).
    A folder that cannot be made or written (a path through a file, /proc, no permission) is a
    RunError naming it, before anything is stored."""
    try:
        if not options.run_dir:
            workspace = Path(options.workspace)
            workspace.mkdir(parents=True, exist_ok=True)
            ignore = workspace / ".gitignore"
            if not ignore.exists():
                ignore.write_text(WORKSPACE_GITIGNORE)
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(run_dir) else ""
        raise RunError(f"cannot create the run folder {run_dir}: {exc.strerror or exc}{where}; "
                       "give --run-dir (or --workspace) a folder you can write") from None
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise RunError(f"cannot write in the run folder {run_dir} (permission denied); give --run-dir "
                       "(or --workspace) a folder you can write")


def mark_stale_interrupted(store, run_id: str, run: dict[str, Any]) -> None:
    """A run stored as running whose process is gone (we hold its lock now) was interrupted."""
    if run.get("status") == "running":
        store.update_run(run_id, status="interrupted",
                         detail="the process stopped without saying (kill -9, a crash, a power cut)")


def new_run_id(problem_name: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in problem_name)[:40]
    return f"{stamp}-{safe}-{secrets.token_hex(2)}"


def _llm_specs(options: RunOptions, run_dir: Path) -> tuple[str | None, dict[str, str]]:
    def fix(spec: str | None) -> str | None:
        return f"exchange:{run_dir.resolve() / 'exchange'}" if spec == "exchange" else spec

    return fix(options.llm), {role: fix(spec) for role, spec in options.llm_roles.items()}


class SearchSession:
    """One process's work on one run."""

    def __init__(self, options: RunOptions, on_progress: Callable[[dict], None] | None = None):
        self.options = options
        self.on_progress = on_progress
        self.lock = None
        self._prepared_router = None
        if options.resume:
            self.run_dir = Path(options.resume)
            if not (self.run_dir / "run.sqlite").is_file():
                raise RunError(f"{self.run_dir} holds no run database (run.sqlite); nothing to resume")
            self.lock = hold_run(self.run_dir)
            self.store = RunStore.in_dir(self.run_dir, create=False)
            self.run = self.store.run()
            self.run_id = self.run["id"]
            self.stored = self.run["settings"]
            try:
                check_problem_unchanged(self.run)
            except RunError:
                self.close()
                raise
            mark_stale_interrupted(self.store, self.run_id, self.run)
        else:
            self._create(RunStore)

    # ---- creating and reopening --------------------------------------------------------------

    def _create(self, store_cls) -> None:
        options = self.options
        if not options.problem:
            raise RunError("name a problem file to optimize (or --resume RUN_DIR)")
        info = describe_problem(options.problem, options.backend, options.overrides, options.judge.device)
        self.run_id = new_run_id(info.name)
        self.run_dir = new_run_dir(options, self.run_id)
        target = targets.initial_target(options.target, options.eval_mode or "local",
                                        self.run_dir / (options.batch_dir or "evals"), options.judge.device)
        if target is not None:
            targets.describe_on(info, target)
        judge = dataclasses.replace(options.judge, overrides={**options.judge.overrides, **options.overrides})
        info = dataclasses.replace(info, rules=judge.rules)
        llm, roles = _llm_specs(options, self.run_dir)
        # a bad spec, a missing key or an unpriced model under a dollar budget ends here, before
        # the run folder exists
        try:
            self._prepared_router = self._make_router(llm, roles, options.config_file, options.limits)
        except LLMError as exc:
            if isinstance(exc, ConfigError):
                raise
            raise RunError(str(exc)) from None
        self.stored = {"search": options.settings.to_dict(), "limits": options.limits.to_dict(),
                       "seed": options.seed, "problem": info.to_dict(), "judge": judge.to_dict(),
                       "llm": {"default": llm, "roles": roles, "config_file": options.config_file},
                       "eval": options.eval_mode or "local", "eval_workers": options.eval_workers,
                       "skill_dirs": [str(Path(d).resolve()) for d in options.skill_dirs],
                       "prompt_dirs": [str(Path(d).resolve()) for d in options.prompt_dirs],
                       "target": target.to_dict() if target is not None else None}
        if options.batch_dir:
            self.stored.update(batch_dir=options.batch_dir, request_prefix=options.request_prefix)
        if options.settings.seed_start:  # torch.compile's kernels, judged first (seed_start.py)
            self.stored["start"] = write_start(info.path, judge, options.eval_mode or "local")
            announce(self.stored["start"])
        self.lock = claim_run_dir(options, self.run_dir)
        self.store = store_cls.in_dir(self.run_dir)
        self.store.create_run(self.run_id, problem_path=info.path, problem_name=info.name,
                              problem_hash=info.source_hash, problem_source=info.source,
                              settings=self.stored)
        if "start" in self.stored:
            start = self.stored["start"]
            self.store.add_event(self.run_id, "start", {"written": bool(start.get("code")), "reason": start.get("reason"),
                                                        "device": start.get("device")})
        self.run = self.store.run(self.run_id)

    # ---- the pieces -----------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return Settings.from_stored(self.stored["search"])

    @property
    def problem(self) -> ProblemInfo:
        # the rule set comes from the judge settings: runs stored before rule sets map their policy
        rules = JudgeConfig.from_dict(self.stored["judge"]).rules
        return ProblemInfo.from_dict({**self.stored["problem"], "rules": rules})

    def _library(self):
        if getattr(self, "_skill_library", None) is None:
            self._skill_library = SkillLibrary.load(self.stored.get("skill_dirs") or [], encoder=None)
        return self._skill_library

    def _skills(self):
        library = self._library()
        return lambda query, limit: rank_skills(library, query, limit)

    def build_engine(self) -> Engine:
        """A fresh engine with the stored settings, with every stored tell replayed in order (results
        stored as one batch are told as one)."""
        stored_limits = Limits.from_dict(self.stored["limits"])
        engine = Engine(self.problem, self.settings.strategy, stored_limits, self.settings,
                        rng_seed=int(self.stored.get("seed", 0)), skills=self._skills(),
                        skill_names=self._library().names(), target=targets.stored_target(self.stored),
                        extra=targets.prompt_extra(self.stored), prompt_dirs=self.stored.get("prompt_dirs") or None,
                        start=stored_start(self.stored))
        group: list = []
        for entry in self.store.journal(self.run_id):
            try:
                if entry.kind == "tell":
                    group.append(entry)
                    if not entry.with_next:
                        self._tell_group(engine, group)
                        group = []
                    continue
                self._tell_group(engine, group)
                group = []
                if entry.kind == "limits":
                    engine.set_limits(Limits.from_dict(entry.payload), entry.elapsed_s)
                elif entry.kind == "target":
                    engine.set_target(targets.Target.from_dict(entry.payload))
                elif entry.kind == "amend":
                    rejudged.replay(engine, entry.payload)
            except EngineError as exc:
                raise ReplayDiverged(f"replaying run {self.run_id} failed at journal entry {entry.seq}: "
                                     f"{exc}. The run was made by another version of kernelwright.") from None
        self._tell_group(engine, group)  # a batch cut short by a kill: what was stored of it
        engine.take_changed()
        return engine

    @staticmethod
    def _tell_group(engine: Engine, group: list) -> None:
        if group:
            engine.tell_many([(e.ask_id, result_from_dict(e.payload)) for e in group], group[-1].elapsed_s)

    def _learn_target(self) -> RunOutcome | None:
        """Before any prompt: the run's target, from --target or the batch folder's device file. A
        batch run that knows neither pauses here, asking for the device file (or --target)."""
        if targets.stored_target(self.stored) is not None:
            return None
        found = targets.learn(self.options.target, self._eval_mode(), self.evals_dir,
                              JudgeConfig.from_dict(self.stored["judge"]).device)
        if found is None:
            self.evals_dir.mkdir(parents=True, exist_ok=True)
            waiting = targets.WAITING.format(run_dir=self.run_dir, evals=self.evals_dir)
            self.store.update_run(self.run_id, status="paused", detail=waiting)
            return RunOutcome(self.run_id, self.run_dir, "paused", waiting, pending_evals=[self.evals_dir])
        self.stored["target"] = found.to_dict()
        self.stored["problem"] = targets.describe_on(self.problem, found).to_dict()
        self.store.update_run(self.run_id, settings=self.stored)
        self.store.add_event(self.run_id, "target", {"name": found.name, "source": found.source})
        return None

    def _learn_reference_timing(self) -> None:
        """A batch run asks its folder's first contact to time the reference (eager, torch.compile, its
        kernels) and stores the answer for every prompt from round 1 on (`targets.prompt_extra`)."""
        if self._eval_mode() != "batch" or "reference_timing" in self.stored or "reference_timing_note" in self.stored:
            return
        name = f"{self.stored.get('request_prefix') or ''}{targets.REFERENCE_REQUEST}"
        problem = SourceText(self.run["problem_source"], name=f"{self.run['problem_name']}.py")  # as BatchEvaluator
        found = targets.learn_reference_timing(self.evals_dir, name, problem, self.stored.get("judge") or {})
        if found is not None:
            self.stored.update(found)
            self.store.update_run(self.run_id, settings=self.stored)

    def _apply_new_target(self, engine: Engine, elapsed: float) -> None:
        """A device file that says more than the target in use (measured facts after built-in ones,
        another card) becomes the target from here on; the change is journaled for replays."""
        found = targets.newer_target(engine.contexts.target, self.options.target, self._eval_mode(),
                                     self.evals_dir)
        if found is not None:
            self.store.save_change(self.run_id, "target", found.to_dict(), elapsed)
            self.store.add_event(self.run_id, "target", {"name": found.name, "source": found.source})
            engine.set_target(found)

    @property
    def evals_dir(self) -> Path:
        """The run's batch folder: RUN_DIR/evals, or the folder it shares with the other runs of a suite."""
        return Path(os.path.normpath(self.run_dir / (self.stored.get("batch_dir") or "evals")))

    def _eval_mode(self) -> str:
        return self.options.eval_mode or self.stored.get("eval", "local")

    def _apply_new_limits(self, engine: Engine, elapsed: float) -> None:
        current = engine.budget.limits
        wanted = current.merged(self.options.limits) if self.options.resume else current
        if wanted != current:
            self.store.save_limits(self.run_id, wanted.to_dict(), elapsed)
            engine.set_limits(wanted, elapsed)

    def _router(self):
        if self._prepared_router is not None:
            return self._prepared_router
        stored = self.stored["llm"]
        llm, roles = _llm_specs(self.options, self.run_dir)
        default = llm or stored.get("default")
        roles = {**(stored.get("roles") or {}), **roles}
        if default != stored.get("default") or roles != (stored.get("roles") or {}):
            self.store.add_event(self.run_id, "llm", {"default": default, "roles": roles})
        limits = Limits.from_dict(self.stored["limits"]).merged(self.options.limits)
        return self._make_router(default, roles, self.options.config_file or stored.get("config_file"), limits)

    @staticmethod
    def _make_router(default: str | None, roles: dict[str, str], config_file: str | None, limits: Limits):
        config = LLMConfig.load(config_file)
        if not (default or roles or config.default or config.roles):
            raise RunError("no LLM configured: pass --llm SPEC (e.g. openai:gpt-5, exchange, "
                           "replay:CASSETTE.jsonl) or set KW_LLM")
        router = Router(config, default, role_specs=roles)
        if limits.max_usd is not None:
            for role in (*AGENT_NAMES, "templatizer"):  # a dollar budget over an unpriced model would never stop
                provider = router.provider_for(role)
                if provider.price is None:
                    raise RunError(f"a dollar budget is set but {provider.spec} (the {role}) has no "
                                   f'price: add [llm.prices."{provider.model}"] to the config')
        return router

    def _evaluator(self):
        mode = self.options.eval_mode or self.stored.get("eval", "local")
        judge = JudgeConfig.from_dict(self.stored["judge"])
        if mode == "batch":
            return BatchEvaluator(self.run["problem_source"], self.run["problem_name"], judge, self.run_dir,
                                  folder=self.evals_dir, prefix=self.stored.get("request_prefix") or "")
        if is_ray_mode(mode):
            if missing_ray_message(mode):
                raise RunError(missing_ray_message(mode))
            return RayEvaluator.from_mode(mode, self.run["problem_source"], self.run["problem_name"], judge,
                                          self.run_dir, int(self.stored.get("eval_workers", 1)))
        if mode != "local":
            raise RunError(f"--eval must be local, batch, ray or ray:ADDRESS, not {mode!r}")
        return LocalEvaluator(self.run["problem_source"], self.run["problem_name"], judge, self.run_dir,
                              int(self.stored.get("eval_workers", 1)),
                              pool=self.options.shared.pool if self.options.shared else None)

    # ---- running ----------------------------------------------------------------------------

    def run_to_end(self) -> RunOutcome:
        """Run until done, paused or failed; Ctrl-C (or SIGTERM raised as KeyboardInterrupt)
        ends it as `interrupted`, with the best so far written."""
        try:
            return self._run_to_end()
        except KeyboardInterrupt:
            return self.interrupted()

    def interrupted(self) -> RunOutcome:
        detail = f"{INTERRUPTED_DETAIL}; continue with: {resume_command(self.run_dir)}"
        self.store.update_run(self.run_id, status="interrupted", detail=detail)
        run = self.store.run(self.run_id)
        best_path = write_best(self.store, self.run_id, self.run_dir / BEST_FILE)
        spend = run.get("spend") or {}
        return RunOutcome(self.run_id, self.run_dir, "interrupted", detail, run.get("best_candidate"),
                          run.get("best_speedup"), best_path,
                          snapshot={"best_id": run.get("best_candidate"), "best_speedup": run.get("best_speedup"),
                                    "spend": spend, "limits": self.stored.get("limits") or {}})

    def _run_to_end(self) -> RunOutcome:
        return asyncio.run(self.arun_to_end())

    async def arun_to_end(self) -> RunOutcome:
        """`run_to_end` inside a running event loop, beside other runs (a suite); the caller turns
        a Ctrl-C into `interrupted()`."""
        prepared = self._prepare()
        if isinstance(prepared, RunOutcome):
            return prepared
        try:
            outcome = await self._drive(*prepared)
        except Fatal as exc:
            return self._finish(prepared[0], "failed", f"{exc}. After fixing it: {resume_command(self.run_dir)}")
        except Exception as exc:  # a bug: leave the run marked (it stays resumable), then surface it
            self.store.update_run(self.run_id, status="failed", detail=f"{type(exc).__name__}: {exc}")
            raise
        return self._conclude(prepared[0], outcome)

    def _prepare(self):
        """Everything before the asks are answered: the target, the replayed engine, the answerers;
        a RunOutcome instead when the run pauses before it starts (no target yet)."""
        self._learn_reference_timing()
        waiting = self._learn_target()
        if waiting is not None:
            return waiting
        engine = self.build_engine()
        base = self.store.last_elapsed(self.run_id)
        started = time.monotonic()

        def clock() -> float:
            return base + time.monotonic() - started

        self._apply_new_limits(engine, base)
        self._apply_new_target(engine, base)
        mirror = Mirror(self.store, self.run_id, self.settings.objective, best_path=self.run_dir / BEST_FILE)
        self.store.upsert_candidates(self.run_id, [node_row(n, self.settings.objective) for n in engine.tree])
        if self._eval_mode() == "batch" and rejudged.apply(self.store, self.run_id, engine, self.evals_dir,
                                                          self.stored.get("request_prefix") or "", base):
            mirror.sync_tree(engine)  # verdicts judged again: the tree, the best and its file follow
        try:
            router = self._router()
        except LLMError as exc:
            raise RunError(str(exc)) from None
        completions = RouterAnswerer(router, self.run_id, self.store, problem=self.run["problem_name"])
        evaluations = self._evaluator()
        self.store.update_run(self.run_id, status="running", detail=None)
        if self.on_progress:
            self.on_progress(engine.snapshot())
        return engine, mirror, completions, evaluations, clock, router

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
                             f"kernelwright.judge.scheduling.batch {evals[0].parent}`) where the GPU is")
            detail = "; ".join(parts) + f". Then: kernelwright optimize --resume {self.run_dir}"
            result = self._finish(engine, "paused", detail)
            result.pending_prompts, result.pending_evals = prompts, evals
            return result
        return self._finish(engine, "done", engine.stop_reason or "finished")

    def _finish(self, engine: Engine, status: str, detail: str) -> RunOutcome:
        snapshot = engine.snapshot()
        self.store.update_run(self.run_id, status=status, detail=detail, spend=snapshot["spend"])
        judged_start(snapshot.get("start"))
        best = engine.best()
        best_path = None
        if best is not None:
            best_path = write_best(self.store, self.run_id, self.run_dir / BEST_FILE)
        return RunOutcome(self.run_id, self.run_dir, status, detail, best.id if best else None,
                          snapshot["best_speedup"], best_path, snapshot=snapshot)

    def close(self) -> None:
        store = getattr(self, "store", None)
        if store is not None:
            store.close()
        if self.lock is not None:
            self.lock.release()


def hold_run(run_dir: Path):
    """This process's hold on the run (store.RunLock); RunError when another process has it."""
    try:
        return RunLock(run_dir).acquire()
    except RunBusy as exc:
        raise RunError(str(exc)) from None
    except OSError as exc:  # a folder that cannot hold the lock file (read-only, gone, not a folder)
        raise RunError(f"cannot lock the run folder {run_dir}: {exc.strerror or exc}") from None


def check_problem_unchanged(run: dict[str, Any]) -> None:
    """A resumed run needs its problem file as it was: verdicts of another problem do not compare."""
    path = Path(run["problem_path"])
    if not path.is_file():
        raise RunError(f"the run's problem file {path} is gone; restore it to resume")
    if path.read_text() != run["problem_source"]:
        raise RunError(f"{path} changed since run {run['id']} started; its verdicts would not "
                       "compare. Start a new run, or restore the file.")


def run_search(options: RunOptions, on_progress: Callable[[dict], None] | None = None) -> RunOutcome:
    """Start or resume a run of the agents (the driver of mode "search": modes.py chooses it)."""
    session = SearchSession(options, on_progress)
    try:
        return session.run_to_end()
    finally:
        session.close()
