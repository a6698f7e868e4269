"""The best correct candidate of each region's run, read from a run or a suite folder as
`kernelwright report` reads them: runs found by `store.suite.find_runs`, each run's result by
`report.collect.collect_problem` (the correct candidate fastest over the run's objective under its
own rule set; judge/outcome.py decides what a verdict means)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.report.collect import collect_problem, level_of
from kernelwright.store import RunStore, StoreError
from kernelwright.store.suite import find_runs


@dataclass
class BestCandidate:
    problem: str  # the problem file the run optimized
    run_dir: str
    code: str = ""  # ModelNew's source; "" when the run has no correct candidate
    candidate_id: str = ""
    speedup: float | None = None  # over the run's objective baseline, as the judge measured it
    judge: dict[str, Any] = field(default_factory=dict)  # the run's judge settings
    why: str = ""  # without a correct candidate: why (the run's status, or its verdicts' outcome)


def best_candidates(target: str | Path) -> list[BestCandidate]:
    """One entry per run under `target` (a run folder, a suite folder or a workspace)."""
    found, _ = find_runs(target)
    out = []
    for item in found:
        problem = item.entry.problem if item.entry else ""
        if not (item.run_dir / "run.sqlite").is_file():
            out.append(BestCandidate(problem, str(item.run_dir), why="the run has not started"))
            continue
        try:
            with RunStore.in_dir(item.run_dir, create=False) as store:
                run = store.run()
                result = collect_problem(store, run["id"], run["problem_name"] or item.run_dir.name,
                                         level_of(run["problem_path"]), str(item.run_dir))
        except StoreError as exc:
            out.append(BestCandidate(problem, str(item.run_dir), why=str(exc)))
            continue
        judge = (run.get("settings") or {}).get("judge") or {}
        own = result.result()
        if own.correct and result.best_code:
            out.append(BestCandidate(result.problem, str(item.run_dir), result.best_code, own.best_id or "",
                                     own.speedup.get(result.objective), judge))
        else:
            why = result.not_judged() or f"no correct candidate ({result.status}, {own.judged} verdict(s))"
            out.append(BestCandidate(result.problem, str(item.run_dir), judge=judge, why=why))
    return out
