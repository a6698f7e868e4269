"""The columns of the report's tables, shared by the Markdown and the HTML page (one wording)."""
from __future__ import annotations

from typing import Any, Callable

from .collect import ProblemResult
from .metrics import BASELINE_LABELS, BASELINES, THRESHOLDS, Summary, threshold_key


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def times(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if abs(value) >= 0.1 else f"{value:.3g}x"


def number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _fast(baseline: str, p: float) -> Callable[[Summary], str]:
    return lambda s: pct(s.by_baseline[baseline].fast[threshold_key(p)])


def _stat(baseline: str, name: str) -> Callable[[Summary], str]:
    def cell(s: Summary) -> str:
        stats = s.by_baseline[baseline]
        text = times(getattr(stats, name))
        return text + (f" ({stats.untimed} untimed left out)" if stats.untimed else "")
    return cell


def summary_columns() -> list[tuple[str, Callable[[Summary], str]]]:
    """(header, cell) for one level's row of the results table."""
    columns: list[tuple[str, Callable[[Summary], str]]] = [
        ("problems", lambda s: str(s.n)),
        ("judged", lambda s: f"{s.judged} of {s.n}"),
        ("not judged", lambda s: str(s.not_judged)),
        ("correct (of judged)", lambda s: f"{pct(s.correct_rate)} ({s.correct})"),
    ]
    for baseline in BASELINES:
        label = BASELINE_LABELS[baseline]
        columns += [(f"fast_{threshold_key(p)} vs {label}", _fast(baseline, p)) for p in THRESHOLDS]
        columns += [(f"geomean vs {label}, all judged (incorrect = 1.0x)", _stat(baseline, "geomean_all")),
                    (f"geomean vs {label}, correct only", _stat(baseline, "geomean_correct")),
                    (f"mean vs {label}, all judged (incorrect = 1.0x)", _stat(baseline, "mean_all")),
                    (f"mean vs {label}, correct only", _stat(baseline, "mean_correct"))]
    columns += [("median % of floor", lambda s: "-" if s.median_pct_of_floor is None
                 else f"{s.median_pct_of_floor:.1f}% (n={s.floors})"),
                ("LLM calls / problem", lambda s: number(s.per_problem(s.calls))),
                ("tokens / problem", lambda s: number(s.per_problem(s.tokens), 0)),
                ("$ / problem", lambda s: "-" if s.per_problem(s.usd) is None else f"${s.per_problem(s.usd):.3f}"),
                ("judge-minutes / problem", lambda s: number(s.per_problem(s.judge_minutes), 2))]
    return columns


def problem_columns(rules: str, pending: dict[str, int] | None = None
                    ) -> list[tuple[str, Callable[[ProblemResult], str]]]:
    """(header, cell) for one problem's row (under the rule set `rules`; `pending`: evaluations
    waiting for a verdict, per problem)."""
    def result(p: ProblemResult):
        return p.result(rules)

    def status(p: ProblemResult) -> str:
        r = result(p)
        if not r.known:
            return "not re-judged"
        if r.correct:
            return "correct"
        if p.not_judged(rules, (pending or {}).get(p.name, 0)):
            return "not judged"
        return "incorrect" if p.status != "not started" else "not started"

    return [
        ("problem", lambda p: p.name), ("level", lambda p: p.level), ("run", lambda p: p.status),
        ("result", status), ("best", lambda p: result(p).best_id or "-"),
        ("origin", lambda p: p.origin or "-"),
        ("× eager", lambda p: times(result(p).speedup.get("eager"))),
        ("× torch.compile", lambda p: times(result(p).speedup.get("compile_default"))),
        ("time ms", lambda p: number(result(p).median_ms, 4) if result(p).median_ms is not None else "-"),
        ("% of floor", lambda p: "-" if result(p).pct_of_floor is None else f"{result(p).pct_of_floor:.1f}%"),
        ("evaluations", lambda p: str((p.spend or {}).get("evals", 0))),
        ("LLM calls", lambda p: str((p.spend or {}).get("calls", 0))),
        ("tokens", lambda p: f"{(p.spend or {}).get('tokens', 0):,}"),
        ("$", lambda p: f"${(p.spend or {}).get('usd', 0.0):.3f}"),
        ("judge-min", lambda p: number((p.spend or {}).get("judge_s", 0.0) / 60, 2)),
    ]


def baseline_row(row: dict[str, Any]) -> list[str]:
    """A row of the published-baselines table: ours (measured) beside KernelBench's (published)."""
    def ms(value: Any) -> str:
        return "-" if value is None else f"{value:.4g}"

    ours = row["ours"]
    return [row["problem"], ms(ours.get("eager")), ms(row["theirs"].get("eager")), ms(ours.get("compile_default")),
            ms(row["theirs"].get("compile_default")), row.get("hardware") or ""]


NOT_JUDGED_HEADERS = ["problem", "level", "run folder", "why not judged"]
NOT_JUDGED_INTRO = ("Not the candidates' fault and left out of every rate: their verdicts are system errors (or they "
                    "wait for one). Judge them again where the GPU is: `kernelwright judge --batch DIR "
                    "--retry-errors` re-judges the requests of a batch folder whose verdict is a system error and "
                    "keeps every other verdict.")


def not_judged_rows(report) -> list[list[str]]:
    """A row per problem not judged under the search's rule set: where it is and why."""
    return [[p.name, p.level, p.run_dir, why] for p, why in report.not_judged()]


BASELINE_HEADERS = ["problem", "eager ms (ours)", "eager ms (KernelBench)", "torch.compile ms (ours)",
                    "torch.compile ms (KernelBench)", "their hardware"]
