"""The report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.

Sections: what was measured where (rule set, device, versions, notes), the results table per rule
set, plots (speedup distribution per level, speedup against % of the speed-of-light floor, best
so far against evaluations), the problems (with a best-so-far sparkline each), each problem's
search tree (plan, approach, status, speedup; the path from the reference to the best
highlighted) with its best candidate's evidence and code, the published numbers beside ours with
their source and rules, and the definitions.
"""
from __future__ import annotations

from html import escape

from . import svg
from .cells import (BASELINE_HEADERS, NOT_JUDGED_HEADERS, NOT_JUDGED_INTRO, baseline_row, not_judged_rows,
                    problem_columns, summary_columns, times)
from .collect import ProblemResult, TreeNode
from .leaderboard import ALL, DEFINITIONS, Report
from .markdown import rules_line
from .published import QUOTED

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;
color:#222;padding:0 16px;line-height:1.4}
h1{font-size:24px;margin-bottom:4px}h2{font-size:19px;margin-top:32px;border-bottom:1px solid #ddd}
h3{font-size:16px}table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}th{background:#f4f6f8}
td.num{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#888}
.facts li{margin:2px 0}.note{background:#fff8e1;border-left:4px solid #f0b400;padding:4px 8px;margin:6px 0}
.plots{display:flex;flex-wrap:wrap;gap:16px}.plots figure{margin:0}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:11px;color:#fff;margin:0 3px}
.pass,.correct{background:#2e7d32}.fail,.invalid,.failed{background:#c62828}.reference{background:#546e7a}
.pending,.skipped,.not-started,.not-re-judged,.not-judged{background:#9e9e9e}
ul.tree{list-style:none;padding-left:18px;border-left:1px dotted #bbb;margin:2px 0}
ul.tree li{margin:3px 0}.onpath>.node{background:#e8f5e9;border:1px solid #66bb6a;border-radius:4px;padding:1px 4px}
.best>.node{font-weight:bold;border-width:2px}.node code{font-size:12px}
.plan{color:#444;font-size:12px;white-space:pre-wrap;margin:2px 0 4px 4px}
pre{background:#f7f7f7;border:1px solid #e3e3e3;padding:8px;overflow:auto;font-size:12px;max-height:520px}
details{margin:6px 0}summary{cursor:pointer}section.problem{border-top:1px solid #eee;padding-top:4px}
"""


def _table(headers: list[str], rows: list[list[str]], raw: bool = False, numeric_from: int = 1) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = ' class="num"' if i >= numeric_from else ""
            cells.append(f"<td{cls}>{cell if raw else escape(str(cell))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _facts(report: Report) -> str:
    items = [f"target: <code>{escape(report.target)}</code>; written {escape(report.created)} by kernelwright "
             f"{escape(report.kernelwright)}" + (f"; suite made by kernelwright {escape(report.made_with)}"
                                                 if report.made_with else ""),
             f"rule set searched with: {escape(rules_line(report.rule_sets[0]))}"]
    if len(report.rule_sets) > 1:
        items.append(f"also judged under: {escape(', '.join(report.rule_sets[1:]))}")
    items += [f"device: {escape(d)}" for d in report.devices] or ["device: no verdict yet"]
    items += [f"software: {escape(s)}" for s in report.software]
    notes = "".join(f'<div class="note">{escape(n)}</div>' for n in report.notes)
    return '<ul class="facts">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>" + notes


def _summary(report: Report, rules: str) -> str:
    names = report.levels + [ALL]
    by_level = report.summaries[rules]
    rows = [[header] + [cell(by_level[n]) for n in names] for header, cell in summary_columns()]
    left_out = (f'<p class="muted">{report.unknown[rules]} problem(s) not re-judged under {escape(rules)} are '
                "left out.</p>") if report.unknown.get(rules) else ""
    return (f"<h2>Results under <code>{escape(rules)}</code></h2><p>{escape(rules_line(rules))}</p>{left_out}"
            + _table(["metric"] + names, rows))


def _by_rules(report: Report) -> str:
    if len(report.rule_sets) < 2:
        return ""
    rows = [[header] + [cell(report.summaries[r][ALL]) for r in report.rule_sets] for header, cell in summary_columns()]
    return "<h2>Overall, by rule set</h2>" + _table(["metric (all problems)"] + report.rule_sets, rows)


def _plots(report: Report) -> str:
    rules = report.rule_sets[0]
    figures = []
    for baseline, label in (("eager", "eager PyTorch"), ("compile_default", "torch.compile")):
        groups: dict[str, list[tuple[float, str]]] = {level: [] for level in report.levels}
        failed = {level: 0 for level in report.levels}
        for p in report.problems:
            r = p.result(rules)
            value = r.speedup.get(baseline) if r.correct else None
            if value is not None:
                groups[p.level].append((value, p.name))
            elif not r.correct and r.known:
                failed[p.level] += 1
        if any(groups.values()):
            figures.append(svg.strip_plot(groups, f"speedup vs {label} per level (correct problems)", failed))
    points = [(p.result(rules).pct_of_floor, p.result(rules).speedup.get("eager"), p.name) for p in report.problems
              if p.result(rules).correct and p.result(rules).pct_of_floor is not None
              and p.result(rules).speedup.get("eager")]
    if points:
        figures.append(svg.scatter(points, "speedup vs eager against % of the speed-of-light floor"))
    series = {p.name: p.curve for p in report.problems if any(v is not None for v in p.curve)}
    if series:
        figures.append(svg.curves(series, "best speedup so far (vs the run's objective) against evaluations"))
    if not figures:
        return "<h2>Plots</h2><p class=\"muted\">no correct candidate yet: nothing to plot</p>"
    return "<h2>Plots</h2><div class=\"plots\">" + "".join(f"<figure>{f}</figure>" for f in figures) + "</div>"


def _problems_table(report: Report) -> str:
    rules = report.rule_sets[0]
    columns = problem_columns(rules, report.pending)
    rows = []
    for p in report.problems:
        cells = [escape(cell(p)) for _, cell in columns]
        cells[0] = f'<a href="#p-{escape(p.name)}">{cells[0]}</a>'
        rows.append(cells + [svg.sparkline(p.curve)])
    pending = ""
    if report.pending and any(report.pending.values()):
        pending = "<p>Evaluations still waiting for a verdict: " + escape(", ".join(
            f"{name} {n}" for name, n in sorted(report.pending.items()) if n)) + "</p>"
    return (f"<h2>Problems (under <code>{escape(rules)}</code>)</h2>"
            + _table([h for h, _ in columns] + ["best so far"], rows, raw=True, numeric_from=5) + pending
            + _not_judged(report))


def _not_judged(report: Report) -> str:
    rows = not_judged_rows(report)
    if not rows:
        return ""
    return (f'<h2 id="not-judged">Not judged ({len(rows)} of {len(report.problems)} problems)</h2>'
            f"<p>{escape(NOT_JUDGED_INTRO)}</p>" + _table(NOT_JUDGED_HEADERS, rows, numeric_from=len(NOT_JUDGED_HEADERS)))


def _badge(status: str) -> str:
    return f'<span class="badge {escape(status.replace(" ", "-"))}">{escape(status)}</span>'


def _tree(nodes: list[TreeNode]) -> str:
    children: dict[str | None, list[TreeNode]] = {}
    ids = {n.id for n in nodes}
    for node in nodes:
        parent = node.parent if node.parent in ids else None
        children.setdefault(parent, []).append(node)
    best = next((n.id for n in nodes if n.on_best_path and not any(
        c.on_best_path for c in children.get(n.id, []))), None)

    def item(node: TreeNode) -> str:
        classes = " ".join(c for c in ("onpath" if node.on_best_path else "", "best" if node.id == best else "") if c)
        label = f"<code>{escape(node.id)}</code> {escape(node.action)} {_badge(node.status)}"
        if node.speedup is not None:
            label += f" <b>{escape(times(node.speedup))}</b>"
        if node.approach:
            label += f' <span class="muted">{escape(node.approach)}</span>'
        if node.reason and node.status in ("fail", "invalid", "duplicate"):
            label += f' <span class="muted">— {escape(node.reason[:160])}</span>'
        plan = f'<div class="plan">{escape(node.plan[:1200])}</div>' if node.plan and node.action != "reference" else ""
        kids = children.get(node.id, [])
        sub = '<ul class="tree">' + "".join(item(k) for k in kids) + "</ul>" if kids else ""
        return f'<li class="{classes}"><span class="node">{label}</span>{plan}{sub}</li>'

    return '<ul class="tree">' + "".join(item(n) for n in children.get(None, [])) + "</ul>"


def _problem_section(p: ProblemResult, rules: str, waiting: int = 0) -> str:
    r = p.result(rules)
    why = p.not_judged(rules, waiting)
    head = (f"{escape(p.name)} ({escape(p.level)}) — run {escape(p.status)}, "
            + (f"best {escape(r.best_id or '')} at {escape(times(r.speedup.get('eager')))} vs eager"
               if r.correct else f"not judged: {escape(why[:300])}" if why else "no correct candidate"))
    parts = [f'<section class="problem" id="p-{escape(p.name)}"><h3>{head}</h3>',
             f'<p class="muted">problem <code>{escape(p.problem)}</code>; run folder <code>{escape(p.run_dir)}</code>'
             + (f"; {escape(p.detail[:400])}" if p.detail else "") + "</p>"]
    if p.tree:
        parts.append("<details open><summary>search tree (the path from the reference to the best is "
                     "highlighted)</summary>" + _tree(p.tree) + "</details>")
    if p.best_evidence:
        parts.append("<details><summary>best candidate's verdict</summary><pre>"
                     + escape("\n".join(p.best_evidence)) + "</pre></details>")
    if p.best_code:
        parts.append("<details><summary>best candidate's code</summary><pre><code>" + escape(p.best_code)
                     + "</code></pre></details>")
    return "".join(parts) + "</section>"


def _published(report: Report) -> str:
    if not report.shows_published:
        return ""
    parts = ["<h2>Published numbers (not measured here)</h2>"]
    rows = report.published_rows()
    if rows:
        parts.append("<h3>KernelBench's published baseline times beside the baselines our judge measured</h3>"
                     f"<p>Source: {escape(report.published.source())}. Rules: a baseline is the reference program "
                     "itself (eager PyTorch, torch.compile default inductor); no rule set applies.</p>"
                     + _table(BASELINE_HEADERS, [baseline_row(r) for r in rows]))
    levels = sorted({lv for q in QUOTED for lv in q.levels})
    parts.append("<h3>Results reported by other systems (as quoted; not comparable with the tables above)</h3>"
                 + _table(["system", "claim"] + levels + ["source", "rules"],
                          [[q.system, q.claim] + [q.levels.get(lv, "-") for lv in levels] + [q.source, q.rules]
                           for q in QUOTED], numeric_from=2))
    return "".join(parts)


def render_html(report: Report) -> str:
    rules = report.rule_sets[0]
    body = [f"<h1>kernelwright results: {escape(report.title)}</h1>", _facts(report)]
    body += [_summary(report, r) for r in report.rule_sets]
    body += [_by_rules(report), _plots(report), _problems_table(report), "<h2>Search trees and best candidates</h2>"]
    body += [_problem_section(p, rules, report.pending.get(p.name, 0)) for p in report.problems]
    body += [_published(report), "<h2>Definitions</h2><ul>"
             + "".join(f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in DEFINITIONS.items()) + "</ul>"]
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>kernelwright results: {escape(report.title)}</title><style>{CSS}</style></head><body>"
            + "".join(body) + "</body></html>\n")
