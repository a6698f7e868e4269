"""`kernelwright optimize` without an LLM: the template autotuner (kernelwright.tune.autopilot),
recorded in a run folder like any other run.

Every judged template instance becomes a candidate (action "tune", its parameters as the plan)
with its verdict, stored before the next one is judged; the best instance is written with the same
evidence header as an agent-written one. Measurements also go to a tuning cache inside the run
folder (`autotune/measurements.sqlite`), so `kernelwright optimize --resume RUN_DIR` (optionally
with a larger `--max-evals`) runs the same seeded search again: instances already measured come
from the cache under their old candidate ids, and only the rest are judged.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kernelwright.judge.config import JudgeConfig

from ..problem_info import describe_problem
from .session import BEST_FILE, RunError, RunOptions, RunOutcome, new_run_id

DEFAULT_EVALS = 16  # instances judged when no --max-evals is given
STATUS_OF = {"pass": "pass", "fail": "fail", "error": "fail", "pruned": "skipped"}
MODE = "autotune"  # settings["mode"] of a run made here


@dataclass
class _Plan:
    """What one autotune session needs, whether the run is new or resumed."""

    run_id: str
    run_dir: Path
    problem_path: str
    judge: JudgeConfig
    budget: int
    seed: int
    workers: int
    limits: dict[str, Any]


def _speedup(verdict: dict | None) -> float | None:
    return ((verdict or {}).get("speedup") or {}).get("eager")


def is_autotune_run(run_dir: str | Path) -> bool:
    """Whether RUN_DIR holds a run made by the template autotuner (no LLM)."""
    from kernelwright.store import RunStore, StoreError

    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            return (store.run().get("settings") or {}).get("mode") == MODE
    except StoreError:
        return False


def run_autotune(options: RunOptions, on_progress: Callable[[dict], None] | None = None) -> RunOutcome:
    """A new autotune run for `options.problem`, or the run in `options.resume` continued."""
    from kernelwright.store import RunStore

    if options.resume:
        run_dir = Path(options.resume)
        if not (run_dir / "run.sqlite").is_file():
            raise RunError(f"{run_dir} holds no run database (run.sqlite); nothing to resume")
        with RunStore.in_dir(run_dir, create=False) as store:
            plan = _resumed_plan(store, run_dir, options)
            return _tune(store, plan, on_progress)
    info = describe_problem(options.problem, options.backend, options.overrides, options.judge.device)
    run_id = new_run_id(info.name)
    run_dir = Path(options.run_dir) if options.run_dir else Path(options.workspace) / run_id
    if (run_dir / "run.sqlite").exists():
        raise RunError(f"{run_dir} already holds a run")
    judge = dataclasses.replace(options.judge, overrides={**options.judge.overrides, **options.overrides})
    budget = options.limits.max_evals or DEFAULT_EVALS
    settings = {"mode": MODE, "problem": info.to_dict(), "judge": judge.to_dict(),
                "limits": options.limits.to_dict(), "search": {"strategy": MODE}, "budget_evals": budget,
                "seed": options.seed, "eval_workers": options.eval_workers}
    with RunStore.in_dir(run_dir) as store:
        store.create_run(run_id, problem_path=info.path, problem_name=info.name, problem_hash=info.source_hash,
                         problem_source=info.source, settings=settings, status="running")
        store.upsert_candidates(run_id, [{"id": "c0", "action": "reference", "status": "reference",
                                          "code": info.source, "speedup": 1.0}])
        plan = _Plan(run_id, run_dir, options.problem, judge, budget, options.seed, options.eval_workers,
                     options.limits.to_dict())
        return _tune(store, plan, on_progress)


def _resumed_plan(store, run_dir: Path, options: RunOptions) -> _Plan:
    """The stored run's settings; a larger --max-evals raises the budget (and is recorded)."""
    run = store.run()
    settings = run["settings"] or {}
    if settings.get("mode") != MODE:
        raise RunError(f"{run_dir} holds an LLM search, not a template autotuner run")
    path = Path(run["problem_path"])
    if not path.is_file():
        raise RunError(f"the run's problem file {path} is gone; restore it to resume")
    if path.read_text() != run["problem_source"]:
        raise RunError(f"{path} changed since run {run['id']} started; its verdicts would not compare. "
                       "Start a new run, or restore the file.")
    budget = options.limits.max_evals or int(settings.get("budget_evals") or DEFAULT_EVALS)
    if budget != settings.get("budget_evals"):
        store.update_run(run["id"], settings={**settings, "budget_evals": budget})
    store.add_event(run["id"], "resumed", {"budget_evals": budget})
    limits = {**(settings.get("limits") or {}), "max_evals": budget}
    return _Plan(run["id"], run_dir, str(path), JudgeConfig.from_dict(settings["judge"]), budget,
                 int(settings.get("seed", 0)), int(options.eval_workers or settings.get("eval_workers") or 1), limits)


def _tune(store, plan: _Plan, on_progress: Callable[[dict], None] | None) -> RunOutcome:
    from kernelwright.report.best import write_best
    from kernelwright.tune.autopilot import optimize_without_llm
    from kernelwright.tune.cache import TuneCache

    run_id = plan.run_id
    store.update_run(run_id, status="running", detail=None)

    def tuned() -> int:
        return sum(1 for row in store.candidates(run_id) if row["action"] == "tune")

    spend = {"calls": 0, "tokens": 0, "usd": 0.0, "evals": tuned()}

    def on_result(step) -> None:
        verdict = step.measurement.verdict
        cid = f"t{step.index}"
        store.upsert_candidates(run_id, [{
            "id": cid, "parent_id": "c0", "search_parent": "c0", "action": "tune",
            "status": STATUS_OF.get(step.measurement.status, "fail"), "code": step.source,
            "plan": json.dumps(step.params, sort_keys=True), "approach_key": step.template_name,
            "speedup": _speedup(verdict), "reason": step.measurement.error or ""}])
        if verdict:
            store.save_verdict(run_id, cid, verdict)
        spend["evals"] = tuned()
        store.update_run(run_id, spend=spend)
        if on_progress:
            on_progress({"candidates": spend["evals"], "spend": spend, "limits": plan.limits})

    cache = TuneCache(plan.run_dir / "autotune" / "measurements.sqlite")
    try:
        result = optimize_without_llm(plan.problem_path, budget_evals=plan.budget, judge_config=plan.judge,
                                      on_result=on_result, workers=plan.workers, seed=plan.seed,
                                      workdir=plan.run_dir / "autotune", cache=cache)
    except KeyboardInterrupt:
        store.update_run(run_id, status="interrupted", detail="stopped by the user", spend=spend)
        raise
    finally:
        cache.close()
    best_id = _best_candidate(store, run_id, result.best_source)
    status = "done" if result.matched else "failed"
    best_speedup = _speedup(store.verdict(run_id, best_id)) if best_id else None
    store.update_run(run_id, status=status, detail=result.message, best_candidate=best_id,
                     best_speedup=best_speedup, spend=spend)
    best_path = write_best(store, run_id, plan.run_dir / BEST_FILE) if best_id else None
    store_rows = [r for r in store.candidates(run_id) if r["action"] == "tune"]
    return RunOutcome(run_id, plan.run_dir, status, result.message, best_id, best_speedup, best_path,
                      snapshot={"best_id": best_id, "best_speedup": best_speedup, "candidates": spend["evals"],
                                "passing": sum(1 for r in store_rows if r["status"] == "pass"),
                                "spend": spend, "limits": plan.limits})


def _best_candidate(store, run_id: str, best_source: str | None) -> str | None:
    if not best_source:
        return None
    for row in store.candidates(run_id):
        if row["action"] == "tune" and row["code"] == best_source and row["status"] == "pass":
            return row["id"]
    return None
