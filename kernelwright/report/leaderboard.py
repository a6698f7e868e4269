"""The results table of many problems: per level and overall, under each rule set with verdicts.

    report = build_report(problems, title="level 1 and 2", target="kw-runs/<suite>")
    paths = write_report(report, "kw-runs/<suite>/report")   # report.json, report.md, report.html

`problems` are `collect.ProblemResult`s (one per run, or per problem of a suite whose run never
started). The rule set a suite was searched with comes first; a rule set some runs were re-judged
under (`kernelwright runs rejudge`) gets its own table, over the problems whose outcome under it is
known. What the page must state is gathered here: devices, library versions, kernelwright
versions, sizes shrunk for a CPU, how much of a batch suite has been judged, and the published
numbers that are shown beside ours with their source and rules (only where they compare: problems
of a KernelBench level judged on a GPU at their own sizes).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelwright import __version__

from .collect import ProblemResult, is_level
from .metrics import Score, Summary, summarize
from .published import QUOTED, PublishedBaselines

ALL = "all"


@dataclass
class Report:
    title: str
    target: str
    created: str
    kernelwright: str  # the version that wrote the report
    made_with: str = ""  # the version that made the suite (its manifest), when known
    problems: list[ProblemResult] = field(default_factory=list)
    rule_sets: list[str] = field(default_factory=list)  # the search's first
    summaries: dict[str, dict[str, Summary]] = field(default_factory=dict)  # rules -> level|"all" -> Summary
    unknown: dict[str, int] = field(default_factory=dict)  # rules -> problems whose outcome there is unknown
    devices: list[str] = field(default_factory=list)
    software: list[str] = field(default_factory=list)
    pending: dict[str, int] = field(default_factory=dict)  # problem -> evaluations still waiting for a verdict
    notes: list[str] = field(default_factory=list)
    published: PublishedBaselines | None = None

    @property
    def levels(self) -> list[str]:
        return sorted({p.level for p in self.problems})

    def not_judged(self, rules: str | None = None) -> list[tuple[ProblemResult, str]]:
        """(problem, why) for each problem not judged under `rules` (default: the search's)."""
        rules = rules or (self.rule_sets[0] if self.rule_sets else "kernelbench")
        found = [(p, p.not_judged(rules, self.pending.get(p.name, 0))) for p in self.problems]
        return [(p, why) for p, why in found if why]

    @property
    def shows_published(self) -> bool:
        """Whether published numbers belong beside this report: some problem is a KernelBench level's,
        judged on a GPU at its own sizes (a CPU report, or one of other problems, compares with none)."""
        return any(is_level(p.level) and not p.shrunk
                   and p.device.startswith("cuda") for p in self.problems)

    def published_rows(self) -> list[dict[str, Any]]:
        """Per problem whose baselines our judge measured at the problem's own sizes (not shrunk for a
        CPU): ours beside KernelBench's published ones."""
        if self.published is None:
            return []
        rows = []
        for p in self.problems:
            theirs = self.published.lookup(p.level, Path(p.problem).name)
            if not theirs or p.shrunk or not p.baselines_ms:  # ours at the problem's own sizes only
                continue
            rows.append({"problem": p.name, "level": p.level, "shrunk": p.shrunk,
                         "ours": {} if p.shrunk else dict(p.baselines_ms),
                         "theirs": {k: v.get("mean") for k, v in theirs.items()},
                         "hardware": next((v.get("hardware") for v in theirs.values() if v.get("hardware")), "")})
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title, "target": self.target, "created": self.created, "kernelwright": self.kernelwright,
            "made_with": self.made_with, "rule_sets": self.rule_sets, "levels": self.levels,
            "summaries": {r: {lv: s.to_dict() for lv, s in by.items()} for r, by in self.summaries.items()},
            "unknown": self.unknown, "devices": self.devices, "software": self.software, "pending": self.pending,
            "notes": self.notes,
            "not_judged": {r: [{"problem": p.name, "level": p.level, "run_dir": p.run_dir, "error": why}
                               for p, why in self.not_judged(r)] for r in self.rule_sets},
            "definitions": DEFINITIONS,
            "problems": [p.to_dict() for p in self.problems],
            "published": {
                "kernelbench_baselines": {"source": self.published.source(), "rows": self.published_rows()}
                if self.published else None,
                "quoted_results": [asdict(q) for q in QUOTED]} if self.shows_published else None,
        }


DEFINITIONS = {
    "correct": "the problem has a candidate that passed every correctness trial and every check of the rule set",
    "incorrect": "no correct candidate, and at least one verdict is the candidate's fault (wrong result, rejected "
                 "by a check, compile error, crash, timeout while its code ran, out of GPU memory with the GPU to "
                 "itself), or no candidate was made (no template matched, the run never started)",
    "not judged": "no verdict says anything about a candidate: every one is a system error (internal judge error, "
                  "out of GPU memory on a GPU that may have been shared, the problem's reference could not run, "
                  "the machine lacks a tool), or it has none yet (it waits for one, or its run stopped before "
                  "its first: interrupted, paused); left out of every rate below, "
                  "listed with its error to be judged again (`kernelwright judge --batch DIR --retry-errors`)",
    "judged": "the problems that are correct or incorrect: the denominator of the correct rate, fast_p and "
              "the geomeans and means",
    "fast_p": "share of the JUDGED problems that are correct and more than p times faster than the baseline",
    "geomean_all": "geometric mean over all judged problems, an incorrect problem counted as 1.0x (the reference "
                   "kept)",
    "geomean_correct": "geometric mean over the correct problems only",
    "mean_all": "arithmetic mean over all judged problems, an incorrect problem counted as 1.0x",
    "mean_correct": "arithmetic mean over the correct problems only",
    "median_pct_of_floor": "median over correct problems of (speed-of-light floor / measured time) in percent",
    "judge_minutes": "wall time of the judge workers that evaluated the candidates (on a GPU machine: time "
                     "holding a GPU lane, several lanes share a GPU)",
    "best candidate": "per problem and rule set, the correct candidate fastest against the run's objective baseline",
}


def score(problem: ProblemResult, rules: str, waiting: int = 0) -> Score | None:
    """The problem's score under `rules`, None where its outcome there is unknown. Not judged: its
    verdicts are system errors only, or it has none and `waiting` evaluations wait for one."""
    result = problem.result(rules)
    if not result.known:
        return None
    spend = problem.spend or {}
    return Score(result.correct, dict(result.speedup), result.pct_of_floor, int(spend.get("calls") or 0),
                 int(spend.get("tokens") or 0), float(spend.get("usd") or 0.0), float(spend.get("judge_s") or 0.0),
                 judged=not problem.not_judged(rules, waiting))



def build_report(problems: list[ProblemResult], *, title: str, target: str, made_with: str = "",
                 pending: dict[str, int] | None = None, published: PublishedBaselines | None = None) -> Report:
    report = Report(title, target, datetime.now(timezone.utc).isoformat(timespec="seconds"), __version__, made_with,
                    problems=list(problems), pending=dict(pending or {}), published=published)
    searched = [p.rules for p in problems if p.status != "not started"]
    first = max(set(searched), key=searched.count) if searched else "kernelbench"
    others = sorted({r for p in problems for r in p.results} - {first})
    report.rule_sets = [first] + others
    for rules in report.rule_sets:
        scored = [(p, score(p, rules, report.pending.get(p.name, 0))) for p in problems]
        report.unknown[rules] = sum(1 for _, s in scored if s is None)
        by_level: dict[str, Summary] = {}
        for level in report.levels:
            by_level[level] = summarize([s for p, s in scored if s is not None and p.level == level])
        by_level[ALL] = summarize([s for _, s in scored if s is not None])
        report.summaries[rules] = by_level
    _facts(report)
    return report


def _facts(report: Report) -> None:
    devices, software = set(), set()
    for p in report.problems:
        env = p.environment
        if env.get("gpu"):
            devices.add(f"{env['gpu']} (sm {env.get('capability', '?')}, CUDA runtime {env.get('cuda_runtime', '?')}, "
                        f"driver {env.get('driver', '?')})")
        elif env.get("cpu") or p.device.startswith("cpu"):
            devices.add(f"CPU {env.get('cpu', '')} (Triton interpreter: CPU wall time, not GPU performance)")
        versions = ", ".join(f"{k} {env[k]}" for k in ("torch", "triton", "nvcc", "python") if env.get(k))
        if versions:
            software.add(versions)
    report.devices, report.software = sorted(devices), sorted(software)
    shrunk = [p.name for p in report.problems if p.shrunk]
    if shrunk:
        report.notes.append(f"{len(shrunk)} problem(s) were judged at sizes shrunk to fit a CPU: their times are "
                            "not comparable with GPU numbers or with published baselines")
    if len(report.devices) > 1:
        report.notes.append("verdicts come from more than one device: speedups mix devices")
    waiting = sum(report.pending.values())
    if waiting:
        judged = sum(int((p.spend or {}).get("evals") or 0) for p in report.problems)
        with_result = sum(1 for p in report.problems if (p.spend or {}).get("evals"))
        report.notes.append(
            f"partial: {waiting} evaluation(s) still wait for a verdict ({judged} judged, "
            f"{judged / (judged + waiting):.0%} of those requested); {with_result} of {len(report.problems)} "
            "problems have at least one verdict. Problems with verdicts but no correct candidate count as "
            "incorrect (1.0x); those with no verdict yet are not judged.")
    missing = report.not_judged()
    if missing:
        total = report.summaries[report.rule_sets[0]][ALL]
        report.notes.append(
            f"{total.judged} of {total.n} problems judged: {len(missing)} not judged (system errors or no verdict "
            "yet, listed under \"Not judged\"), left out of the rates and geomeans, never counted as failures; "
            "judge them again: `kernelwright judge --batch DIR --retry-errors`")
    for rules in report.rule_sets[1:]:
        if report.unknown.get(rules):
            report.notes.append(f"under {rules}: {report.unknown[rules]} problem(s) with a correct candidate were "
                                f"never re-judged (`kernelwright runs rejudge RUN --rules {rules}`) and are left out "
                                "of that table")


def write_report(report: Report, out_dir: str | Path) -> dict[str, Path]:
    """report.json, report.md and report.html (one self-contained page) in `out_dir`."""
    from .html import render_html  # noqa: PLC0415 -- cycle: html.py imports Report from here at its top (KNOWN_CYCLES)
    from .markdown import render_markdown  # noqa: PLC0415 -- cycle: markdown.py imports Report from here at its top (KNOWN_CYCLES)

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "markdown": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(report.to_dict(), indent=1, default=str) + "\n")
    paths["markdown"].write_text(render_markdown(report))
    paths["html"].write_text(render_html(report))
    return paths
