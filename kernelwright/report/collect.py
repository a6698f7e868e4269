"""One problem's result, read from its run's store: what the results table and the pages show.

`collect_problem(store, run_id, ...)` takes a store object (`kernelwright.store.RunStore`, or
anything with its reading methods) and returns a `ProblemResult` of plain data:

- the result under each rule set that has verdicts: the correct candidate with the highest
  speedup over the run's objective baseline (for the rule set the run searched with, that is the
  run's best), its speedups over eager and torch.compile, its time and % of the speed-of-light floor;
  without one, whether the problem is incorrect (some verdict is the candidate's fault) or not
  judged (every verdict is a system error: judge/outcome.py decides, per verdict);
- the evaluations in the order they were judged (best-so-far curves);
- the search tree (plan, approach, status, speedup; the path from the reference to the best);
- spend: LLM calls, tokens, dollars (the run's record), judge minutes (the judge workers' wall time:
  on a GPU machine, time holding a GPU lane);
- the best candidate's code and verdict, and the measured baselines.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelwright.judge.outcome import CORRECT, INCORRECT, NOT_JUDGED, outcome
from kernelwright.seed.types import ORIGIN as SEED_ORIGIN

from .best import evidence_lines

OBJECTIVES = ("eager", "compile_default")
NO_LEVEL = "-"  # a run outside a suite whose problem is not in a KernelBench level folder
UNFINISHED = ("running", "interrupted", "paused")  # a run that may still judge its candidates


def is_level(name: str) -> bool:
    """Whether a folder's name is a KernelBench level's (`level1`, `level_2`)."""
    return re.fullmatch(r"level_?\d+", name) is not None


def level_of(problem_path: str) -> str:
    """The KernelBench level of a problem file (`.../level1/19_ReLU.py` -> "level1"), else NO_LEVEL."""
    folder = Path(problem_path).parent.name
    return folder if is_level(folder) else NO_LEVEL


@dataclass
class RuleResult:
    """A problem's outcome under one rule set."""

    rules: str
    correct: bool
    best_id: str | None = None
    speedup: dict[str, float | None] = field(default_factory=dict)  # "eager", "compile_default"
    median_ms: float | None = None
    pct_of_floor: float | None = None
    judged: int = 0  # verdicts stored under this rule set
    known: bool = True  # False: the run's correct candidates were never judged under this set
    outcome: str = INCORRECT  # correct | incorrect (the candidate's fault) | not judged (system errors only)
    system_errors: int = 0  # verdicts that are system errors (judge/outcome.py), not held against the candidate
    error: str = ""  # not judged: the system error of its last verdict, or why it has none


@dataclass
class TreeNode:
    id: str
    parent: str | None
    action: str
    status: str
    plan: str = ""
    approach: str = ""
    speedup: float | None = None
    reason: str = ""
    on_best_path: bool = False


@dataclass
class ProblemResult:
    name: str
    level: str
    problem: str
    run_dir: str
    run_id: str = ""
    status: str = "not started"
    detail: str = ""
    mode: str = "search"  # search, autotune, import
    rules: str = "kernelbench"  # the rule set the run searched with
    objective: str = "eager"
    results: dict[str, RuleResult] = field(default_factory=dict)  # rule set -> outcome
    curve: list[float | None] = field(default_factory=list)  # best speedup (objective) after each evaluation
    tree: list[TreeNode] = field(default_factory=list)
    spend: dict[str, Any] = field(default_factory=dict)  # calls, tokens, usd, evals, judge_s
    baselines_ms: dict[str, float] = field(default_factory=dict)  # measured medians: eager, compile_default
    shrunk: bool = False
    device: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    best_code: str = ""
    best_evidence: list[str] = field(default_factory=list)  # the evidence header's lines
    best_verdict: dict[str, Any] | None = None
    origin: str = ""  # who wrote the best candidate: seed, template, model, imported (origin_of)

    def result(self, rules: str | None = None) -> RuleResult:
        """The outcome under `rules` (default: the run's own rule set). Under a set its candidates
        were never judged by, a problem with no correct candidate fails as under any set; one with a
        correct candidate is unknown there (`known` False: `kernelwright runs rejudge` tells)."""
        rules = rules or self.rules
        if rules in self.results:
            return self.results[rules]
        if rules == self.rules:
            return RuleResult(rules, correct=False)
        own = self.result(self.rules)
        if own.correct:
            return RuleResult(rules, correct=False, known=False)
        return RuleResult(rules, correct=False, outcome=own.outcome, error=own.error)  # as under its own set

    def not_judged(self, rules: str | None = None, waiting: int = 0) -> str:
        """Why the problem was not judged under `rules` ("" when it was): the system error of its
        verdicts, or the `waiting` evaluations when it has no verdict yet."""
        result = self.result(rules)
        if result.correct or not result.known:
            return ""
        if result.outcome == NOT_JUDGED:
            return result.error or "system error"
        if waiting and not result.judged and self.status != "not started":
            return f"{waiting} evaluation(s) wait for a verdict"
        if not result.judged and self.status in UNFINISHED:  # stopped before its first verdict: no judgement yet
            return f"no verdict yet (the run is {self.status}; `kernelwright optimize --resume {self.run_dir}`)"
        return ""

    def to_dict(self, with_code: bool = False) -> dict[str, Any]:
        data = asdict(self)
        if not with_code:
            data.pop("best_code")
            data.pop("best_verdict")
        return data


def not_started(name: str, level: str, problem: str, run_dir: str, error: str = "") -> ProblemResult:
    """A problem of a suite whose run never started (a broken problem file): failed, reference kept."""
    return ProblemResult(name, level, problem, run_dir, status="not started", detail=error)


def collect_problem(store, run_id: str, name: str, level: str, run_dir: str) -> ProblemResult:
    run = store.run(run_id)
    settings = run.get("settings") or {}
    rules = store.run_rules(run_id) or "kernelbench"
    objective = (settings.get("search") or {}).get("objective") or "eager"
    objective = objective if objective in OBJECTIVES else "eager"
    out = ProblemResult(name, level, run["problem_path"], run_dir, run_id, run["status"], run.get("status_detail") or "",
                        settings.get("mode") or "search", rules, objective)
    candidates = store.candidates(run_id)
    rows = store.verdict_rows(run_id)
    out.results = _results(store, run_id, rows, rules, objective)
    out.curve = best_so_far([r for r in rows if r["rules"] == rules], objective)
    best = out.results.get(rules)
    best_id = best.best_id if best else None
    out.tree = _tree(candidates, best_id)
    out.spend = _spend(run, store, run_id, rows)
    if best_id:
        verdict = store.verdict(run_id, best_id, rules)
        candidate = store.candidate(run_id, best_id)
        out.best_verdict = verdict
        out.best_code = (candidate or {}).get("code") or ""
        out.best_evidence = evidence_lines(run, candidate or {"id": best_id}, verdict)
        out.origin = origin_of(out.mode, out.best_code)
    _measured(out, store, run_id, rows, best_id, rules)
    return out


def origin_of(mode: str, code: str) -> str:
    """Who wrote a result's best candidate, so a compile export is never counted as a model's: `seed`
    (torch.compile's kernels exported by `kernelwright seed`, its `# origin:` line), `template` (the
    no-LLM autotuner), `model` (the agents), `imported` (another run's or tool's code)."""
    if re.search(rf"^# origin: {re.escape(SEED_ORIGIN)}$", code, re.M):
        return "seed"
    return {"autotune": "template", "search": "model", "import": "imported"}.get(mode, mode)


def _speedups(row: dict[str, Any]) -> dict[str, float | None]:
    return {"eager": row.get("speedup_eager"), "compile_default": row.get("speedup_compile")}


def _results(store, run_id: str, rows: list[dict], rules: str, objective: str) -> dict[str, RuleResult]:
    """Per rule set with verdicts: the correct candidate fastest over the objective baseline."""
    out: dict[str, RuleResult] = {}
    for name in sorted({r["rules"] for r in rows} | {rules}):
        mine = [r for r in rows if r["rules"] == name]
        passing = [r for r in mine if r["status"] == "pass"]
        if not passing:
            out[name] = _without_pass(store, run_id, name, mine)
            continue
        best = max(passing, key=lambda r: (_key(r, objective), -(r.get("median_ms") or 0.0)))
        verdict = store.verdict(run_id, best["candidate_id"], name) or {}
        out[name] = RuleResult(name, True, best["candidate_id"], _speedups(best), best.get("median_ms"),
                               ((verdict.get("floor") or {}).get("pct_of_floor")), judged=len(mine), outcome=CORRECT,
                               system_errors=_system_errors(store, run_id, name, mine))
    return out


def _outcomes(store, run_id: str, rules: str, rows: list[dict]) -> list:
    return [outcome(store.verdict(run_id, r["candidate_id"], rules) or {"status": r["status"], "stage": r["stage"]})
            for r in rows]


def _system_errors(store, run_id: str, rules: str, rows: list[dict]) -> int:
    return sum(o.system_error for o in _outcomes(store, run_id, rules, [r for r in rows if r["status"] != "pass"]))


def _without_pass(store, run_id: str, rules: str, rows: list[dict]) -> RuleResult:
    """No correct candidate: incorrect when a verdict is the candidate's fault (or there is none: no
    candidate was made), not judged when every verdict is a system error."""
    found = _outcomes(store, run_id, rules, rows)
    errors = [o for o in found if o.system_error]
    if found and len(errors) == len(found):
        return RuleResult(rules, False, judged=len(rows), outcome=NOT_JUDGED, system_errors=len(errors),
                          error=errors[-1].text())
    return RuleResult(rules, False, judged=len(rows), system_errors=len(errors))


def _key(row: dict[str, Any], objective: str) -> float:
    value = _speedups(row).get(objective)
    if value is None:
        value = row.get("speedup_eager")
    return float(value) if value is not None else 0.0


def best_so_far(rows: list[dict[str, Any]], objective: str = "eager") -> list[float | None]:
    """Best correct speedup after each evaluation, in the order the verdicts were stored."""
    curve, best = [], None
    for row in rows:
        if row["status"] == "pass":
            value = _speedups(row).get(objective) or row.get("speedup_eager")
            if value is not None and (best is None or value > best):
                best = float(value)
        curve.append(best)
    return curve


def _tree(candidates: list[dict[str, Any]], best_id: str | None) -> list[TreeNode]:
    by_id = {c["id"]: c for c in candidates}
    path: set[str] = set()
    node = best_id
    while node is not None and node in by_id and node not in path:
        path.add(node)
        node = by_id[node].get("parent_id")
    out = []
    for c in candidates:
        out.append(TreeNode(c["id"], c.get("parent_id"), c.get("action") or "", c.get("status") or "",
                            (c.get("plan") or "").strip(), c.get("approach_key") or "",
                            c.get("speedup") if c.get("status") in ("pass", "reference") else None,
                            ((c.get("reason") or "").strip().splitlines() or [""])[0][:300], c["id"] in path))
    return out


def _spend(run: dict[str, Any], store, run_id: str, rows: list[dict]) -> dict[str, Any]:
    spend = dict(run.get("spend") or {})
    judge_s = 0.0
    for row in rows:  # the wall time of every judge worker (re-judged verdicts included)
        verdict = store.verdict(run_id, row["candidate_id"], row["rules"]) or {}
        judge_s += float((verdict.get("process") or {}).get("wall_s") or 0.0)
    return {"calls": int(spend.get("calls") or 0), "tokens": int(spend.get("tokens") or 0),
            "usd": float(spend.get("usd") or 0.0), "evals": len(rows), "judge_s": round(judge_s, 3),
            "elapsed_s": float(spend.get("elapsed_s") or 0.0)}


def _measured(out: ProblemResult, store, run_id: str, rows: list[dict], best_id: str | None, rules: str) -> None:
    """Baselines, device and environment from the best verdict (else any verdict of the run)."""
    verdict = out.best_verdict
    if verdict is None and rows:
        verdict = store.verdict(run_id, rows[-1]["candidate_id"], rows[-1]["rules"])
    if not verdict:
        return
    baselines = verdict.get("baselines") or {}
    for kind in OBJECTIVES:
        stats = baselines.get(kind)
        if isinstance(stats, dict) and stats.get("median_ms") is not None:
            out.baselines_ms[kind] = float(stats["median_ms"])
    out.shrunk = bool(verdict.get("shrunk"))
    out.device = str(verdict.get("device") or "")
    env = verdict.get("environment") or {}
    out.environment = {k: env[k] for k in ("gpu", "capability", "cpu", "torch", "triton", "cuda_runtime", "nvcc",
                                           "python", "driver") if env.get(k)}
