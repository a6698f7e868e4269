"""`kernelwright optimize` without an LLM: the template autotuner (kernelwright.tune.autopilot),
recorded in a run folder like any other run.

Every judged template instance becomes a candidate (action "tune", its parameters as the plan)
with its verdict, stored before the next one is judged; the best instance is written with the same
evidence header as an agent-written one. There is nothing to resume: a rerun is cheap, and the
tuner's own cache skips instances it has already measured.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable

from ..problem_info import describe_problem
from .session import BEST_FILE, RunError, RunOptions, RunOutcome, new_run_id

DEFAULT_EVALS = 16  # instances judged when no --max-evals is given
STATUS_OF = {"pass": "pass", "fail": "fail", "error": "fail", "pruned": "skipped"}


def _speedup(verdict: dict | None) -> float | None:
    return ((verdict or {}).get("speedup") or {}).get("eager")


def run_autotune(options: RunOptions, on_progress: Callable[[dict], None] | None = None) -> RunOutcome:
    from kernelwright.report.best import write_best
    from kernelwright.store import RunStore
    from kernelwright.tune.autopilot import optimize_without_llm

    info = describe_problem(options.problem, options.backend, options.overrides, options.judge.device)
    run_id = new_run_id(info.name)
    run_dir = Path(options.run_dir) if options.run_dir else Path(options.workspace) / run_id
    if (run_dir / "run.sqlite").exists():
        raise RunError(f"{run_dir} already holds a run")
    judge = dataclasses.replace(options.judge, overrides={**options.judge.overrides, **options.overrides})
    budget = options.limits.max_evals or DEFAULT_EVALS
    settings = {"mode": "autotune", "problem": info.to_dict(), "judge": judge.to_dict(),
                "limits": options.limits.to_dict(), "search": {"strategy": "autotune"}, "budget_evals": budget}
    with RunStore.in_dir(run_dir) as store:
        store.create_run(run_id, problem_path=info.path, problem_name=info.name, problem_hash=info.source_hash,
                         problem_source=info.source, settings=settings, status="running")
        store.upsert_candidates(run_id, [{"id": "c0", "action": "reference", "status": "reference",
                                          "code": info.source, "speedup": 1.0}])
        spend = {"calls": 0, "tokens": 0, "usd": 0.0, "evals": 0}

        def on_result(step) -> None:
            spend["evals"] += 1
            verdict = step.measurement.verdict
            cid = f"t{step.index}"
            store.upsert_candidates(run_id, [{
                "id": cid, "parent_id": "c0", "search_parent": "c0", "action": "tune",
                "status": STATUS_OF.get(step.measurement.status, "fail"), "code": step.source,
                "plan": json.dumps(step.params, sort_keys=True), "approach_key": step.template_name,
                "speedup": _speedup(verdict), "reason": step.measurement.error or ""}])
            if verdict:
                store.save_verdict(run_id, cid, verdict)
            store.update_run(run_id, spend=spend)
            if on_progress:
                on_progress({"candidates": spend["evals"], "spend": spend, "limits": options.limits.to_dict()})

        result = optimize_without_llm(options.problem, overrides=options.overrides, budget_evals=budget,
                                      judge_config=judge, on_result=on_result, workers=options.eval_workers,
                                      seed=options.seed, workdir=run_dir / "autotune")
        best_id = _best_candidate(store, run_id, result.best_source)
        status = "done" if result.matched else "failed"
        best_speedup = _speedup(store.verdict(run_id, best_id)) if best_id else None
        store.update_run(run_id, status=status, detail=result.message, best_candidate=best_id,
                         best_speedup=best_speedup, spend=spend)
        best_path = write_best(store, run_id, run_dir / BEST_FILE) if best_id else None
        store_rows = [r for r in store.candidates(run_id) if r["action"] == "tune"]
    return RunOutcome(run_id, run_dir, status, result.message, best_id, best_speedup, best_path,
                      snapshot={"best_id": best_id, "best_speedup": best_speedup, "candidates": spend["evals"],
                                "passing": sum(1 for r in store_rows if r["status"] == "pass"),
                                "spend": spend, "limits": options.limits.to_dict()})


def _best_candidate(store, run_id: str, best_source: str | None) -> str | None:
    if not best_source:
        return None
    for row in store.candidates(run_id):
        if row["action"] == "tune" and row["code"] == best_source and row["status"] == "pass":
            return row["id"]
    return None
