"""Rich renderings of runs: the list of runs, one run's summary, and its search tree."""
from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from kernelwright.rules import NAMES, header_line

from .best import fmt_speedup

STATUS_STYLE = {"pass": "green", "fail": "red", "invalid": "red", "pending": "yellow",
                "reference": "cyan", "skipped": "dim", "duplicate": "dim", "done": "green", "paused": "yellow",
                "running": "blue", "failed": "red", "interrupted": "yellow", "created": "dim"}


def _speed(value: Any) -> str:
    return fmt_speedup(value) if isinstance(value, (int, float)) else "-"


def _spend(spend: dict | None) -> str:
    if not spend:
        return "-"
    return (f"{spend.get('calls', 0)} calls, {spend.get('tokens', 0):,} tok, ${spend.get('usd', 0):.2f}, "
            f"{spend.get('evals', 0)} evals")


def runs_table(rows: list[tuple[str, dict[str, Any]]]) -> Table:
    """rows: (run folder, run dict) pairs."""
    table = Table(title="kernelwright runs", show_lines=False)
    for column in ("run", "problem", "strategy", "status", "best", "spend", "updated"):
        table.add_column(column, overflow="fold")
    for folder, run in rows:
        status = run["status"]
        strategy = ((run.get("settings") or {}).get("search") or {}).get("strategy", "?")
        best = f"{_speed(run.get('best_speedup'))} ({run['best_candidate']})" if run.get("best_candidate") else "-"
        table.add_row(escape(str(folder)), escape(run["problem_name"]), strategy,
                      f"[{STATUS_STYLE.get(status, '')}]{status}[/]", best, _spend(run.get("spend")),
                      run["updated"][:16].replace("T", " "))
    return table


def run_summary(run: dict[str, Any]) -> Table:
    settings = run.get("settings") or {}
    search = settings.get("search") or {}
    llm = settings.get("llm") or {}
    limits = {k: v for k, v in (settings.get("limits") or {}).items() if v is not None}
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    rows = [("run", run["id"]), ("problem", run["problem_path"]),
            ("backend", (settings.get("problem") or {}).get("backend", "?")),
            ("strategy", search.get("strategy", "?")), ("llm", llm.get("default") or "-"),
            ("rules", _rules(settings)),
            ("evaluation", settings.get("eval", "local")),
            ("status", f"{run['status']}" + (f": {run['status_detail']}" if run.get("status_detail") else "")),
            ("best", f"{run['best_candidate']} at {_speed(run.get('best_speedup'))}" if run.get("best_candidate") else "-"),
            ("spend", _spend(run.get("spend"))),
            ("limits", ", ".join(f"{k}={v}" for k, v in limits.items()) or "none")]
    for name, value in rows:
        table.add_row(name, escape(str(value)))
    return table


def _rules(settings: dict[str, Any]) -> str:
    judge = settings.get("judge") or {}
    if not judge:
        return "-"
    name = judge.get("rules") or ("strict" if judge.get("torch_op_policy", "reject") == "reject" else "kernelbench")
    return header_line(name)


def rules_table(rows: list[dict[str, Any]]) -> Table:
    """Candidates by rule set (rows from `RunStore.verdict_rows`): status and speedup over eager in
    each column, so one run shows what passes under kernelbench, library and strict."""
    present = [n for n in NAMES if any(r["rules"] == n for r in rows)]
    present += sorted({r["rules"] for r in rows} - set(present))
    cells: dict[str, dict[str, str]] = {}
    for row in rows:
        style = STATUS_STYLE.get(row["status"], "")
        speed = f" {_speed(row['speedup_eager'])}" if row["status"] == "pass" and row.get("speedup_eager") else ""
        cells.setdefault(row["candidate_id"], {})[row["rules"]] = f"[{style}]{row['status']}[/]{speed}"
    table = Table(title="verdicts by rule set (speedup vs eager)")
    table.add_column("candidate")
    for name in present:
        table.add_column(name)
    for candidate, by_rules in cells.items():
        table.add_row(escape(candidate), *(by_rules.get(name, "-") for name in present))
    return table


def _label(row: dict[str, Any]) -> str:
    node = row.get("node") or {}
    status = row["status"]
    style = STATUS_STYLE.get(status, "")
    text = f"[bold]{row['id']}[/] {row['action']} [{style}]{status}[/]"
    if row.get("speedup") is not None and status in ("pass", "reference"):
        text += f" {_speed(row['speedup'])}"
    if node.get("visits"):
        text += f" [dim]N={node['visits']} Q={node.get('value_sum', 0) / node['visits']:.2f}[/]"
    if row.get("approach_key"):
        text += f" [dim]{escape(row['approach_key'])}[/]"
    if status in ("fail", "invalid") and row.get("reason"):
        text += f" [red dim]{escape(row['reason'].strip().splitlines()[0][:90])}[/]"
    if status == "duplicate" and node.get("duplicate_of"):
        text += f" [dim]of {escape(node['duplicate_of'])}[/]"
    return text


def candidate_tree(candidates: list[dict[str, Any]]) -> Tree:
    """The search as a tree along code lineage (a repair hangs under the candidate it fixes)."""
    by_parent: dict[str | None, list[dict]] = {}
    for row in candidates:
        by_parent.setdefault(row.get("parent_id"), []).append(row)
    roots = by_parent.get(None, [])
    tree = Tree("[bold]search tree[/]")

    def add(branch: Tree, row: dict) -> None:
        child = branch.add(_label(row))
        for sub in by_parent.get(row["id"], []):
            add(child, sub)

    for row in roots:
        add(tree, row)
    return tree
