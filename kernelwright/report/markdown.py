"""The report as Markdown: the results table per rule set (metrics down, levels across), the
problems, the published numbers beside ours with their source and rules, and the definitions."""
from __future__ import annotations

from .cells import (BASELINE_HEADERS, NOT_JUDGED_HEADERS, NOT_JUDGED_INTRO, baseline_row, not_judged_rows,
                    problem_columns, summary_columns)
from .leaderboard import ALL, DEFINITIONS, Report
from .published import QUOTED
from kernelwright.rules import header_line


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    def clean(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(clean(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(clean(c) for c in row) + " |" for row in rows]
    return lines + [""]


def rules_line(name: str) -> str:
    try:
        return header_line(name)
    except (KeyError, ValueError):
        return name


def header_lines(report: Report) -> list[str]:
    lines = [f"# kernelwright results: {report.title}", "",
             f"- target: `{report.target}`; report written {report.created} by kernelwright {report.kernelwright}"
             + (f"; suite made by kernelwright {report.made_with}" if report.made_with else ""),
             f"- rule set searched with: {rules_line(report.rule_sets[0])}"]
    if len(report.rule_sets) > 1:
        lines.append(f"- also judged under: {', '.join(report.rule_sets[1:])} (`kernelwright runs rejudge`)")
    lines += [f"- device: {d}" for d in report.devices] or ["- device: no verdict yet"]
    lines += [f"- software: {s}" for s in report.software]
    lines += [f"- note: {n}" for n in report.notes]
    return lines + [""]


def summary_table(report: Report, rules: str) -> list[str]:
    by_level = report.summaries[rules]
    names = report.levels + [ALL]
    rows = [[header] + [cell(by_level[name]) for name in names] for header, cell in summary_columns()]
    return _table(["metric"] + names, rows)


def by_rules_table(report: Report) -> list[str]:
    rows = [[header] + [cell(report.summaries[r][ALL]) for r in report.rule_sets] for header, cell in summary_columns()]
    return _table(["metric (all problems)"] + report.rule_sets, rows)


def render_markdown(report: Report) -> str:
    lines = header_lines(report)
    for rules in report.rule_sets:
        lines += [f"## Results under `{rules}`", "", rules_line(rules), ""]
        if report.unknown.get(rules):
            lines += [f"{report.unknown[rules]} problem(s) not re-judged under {rules} are left out.", ""]
        lines += summary_table(report, rules)
    if len(report.rule_sets) > 1:
        lines += ["## Overall, by rule set", ""] + by_rules_table(report)
    search = report.rule_sets[0]
    columns = problem_columns(search, report.pending)
    lines += [f"## Problems (under `{search}`)", ""]
    lines += _table([h for h, _ in columns], [[cell(p) for _, cell in columns] for p in report.problems])
    missing = not_judged_rows(report)
    if missing:
        lines += [f"## Not judged ({len(missing)} of {len(report.problems)} problems)", "", NOT_JUDGED_INTRO, ""]
        lines += _table(NOT_JUDGED_HEADERS, missing)
    if any(report.pending.values()):
        lines += ["Evaluations still waiting for a verdict: " + ", ".join(
            f"{name} {n}" for name, n in sorted(report.pending.items()) if n), ""]
    lines += published_section(report)
    lines += ["## Definitions", ""] + [f"- **{k}**: {v}" for k, v in DEFINITIONS.items()] + [""]
    return "\n".join(lines)


def published_section(report: Report) -> list[str]:
    if not report.shows_published:
        return []
    lines = ["## Published numbers (not measured here)", ""]
    rows = report.published_rows()
    if rows:
        lines += ["### KernelBench's published baseline times beside the baselines our judge measured", "",
                  f"Source: {report.published.source()}. Rules: a baseline is the reference program itself "
                  "(eager PyTorch, torch.compile default inductor); no rule set applies.", ""]
        lines += _table(BASELINE_HEADERS, [baseline_row(r) for r in rows])
    lines += ["### Results reported by other systems (as quoted; not comparable with the tables above)", ""]
    levels = sorted({lv for q in QUOTED for lv in q.levels})
    lines += _table(["system", "claim"] + levels + ["source", "rules"],
                    [[q.system, q.claim] + [q.levels.get(lv, "-") for lv in levels] + [q.source, q.rules]
                     for q in QUOTED])
    return lines
