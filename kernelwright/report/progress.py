"""The live progress panel of `kernelwright optimize`: best speedup, tree size, spend."""
from __future__ import annotations

from typing import Any

from rich.panel import Panel
from rich.table import Table

from .best import fmt_speedup


def _limit(used: Any, limit: Any, fmt: str = "{}") -> str:
    text = fmt.format(used)
    return f"{text} / {fmt.format(limit)}" if limit is not None else text


def progress_panel(snapshot: dict[str, Any], title: str = "kernelwright optimize") -> Panel:
    spend, limits = snapshot.get("spend") or {}, snapshot.get("limits") or {}
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    best = snapshot.get("best_speedup")
    table.add_row("best", f"{fmt_speedup(best)} ({snapshot.get('best_id')})" if best is not None else "none yet")
    table.add_row("tree", f"{snapshot.get('candidates', 0)} candidates, {max(0, snapshot.get('passing', 0))} correct, "
                          f"{snapshot.get('active_jobs', 0)} expansions in flight")
    table.add_row("LLM", f"{_limit(spend.get('calls', 0), limits.get('max_calls'))} calls, "
                         f"{_limit(spend.get('tokens', 0), limits.get('max_tokens'), '{:,}')} tokens, "
                         f"{_limit(spend.get('usd', 0.0), limits.get('max_usd'), '${:.2f}')}")
    minutes = spend.get("elapsed_s", 0.0) / 60
    table.add_row("judge", f"{_limit(spend.get('evals', 0), limits.get('max_evals'))} evaluations")
    table.add_row("time", _limit(minutes, limits.get("max_minutes"), "{:.1f}") + " min")
    if snapshot.get("stop_reason"):
        table.add_row("stop", str(snapshot["stop_reason"]))
    return Panel(table, title=title, expand=False)
