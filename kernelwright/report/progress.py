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
    if snapshot.get("mode") == "autotune":
        table.add_row("LLM", "none (template autotuner)")
    else:
        table.add_row("LLM", f"{_limit(spend.get('calls', 0), limits.get('max_calls'))} calls, "
                             f"{_limit(spend.get('tokens', 0), limits.get('max_tokens'), '{:,}')} tokens, "
                             f"{_limit(spend.get('usd', 0.0), limits.get('max_usd'), '${:.2f}')}")
    minutes = spend.get("elapsed_s", 0.0) / 60
    stored = f" ({snapshot['stored_before']} stored before this session)" if snapshot.get("stored_before") else ""
    table.add_row("judge", f"{_limit(spend.get('evals', 0), limits.get('max_evals'))} evaluations{stored}")
    tuning = snapshot.get("tuning") or {}
    if tuning.get("jobs"):  # the search's tuning step (search/tuning.py)
        table.add_row("tune", f"{tuning['jobs']} job(s), {tuning.get('active', 0)} running: {tuning.get('evals', 0)} "
                              f"evaluations, {tuning.get('calls', 0)} Templatizer calls, "
                              f"{tuning.get('device_s', 0.0):.1f} {tuning.get('device_label', 'device-seconds')}")
    table.add_row("time", _limit(minutes, limits.get("max_minutes"), "{:.1f}") + " min")
    if snapshot.get("stop_reason"):
        table.add_row("stop", str(snapshot["stop_reason"]))
    return Panel(table, title=title, expand=False)


def progress_line(snapshot: dict[str, Any]) -> str:
    """One line of progress for a log or a pipe (the panel is for terminals)."""
    spend, limits = snapshot.get("spend") or {}, snapshot.get("limits") or {}
    seconds = int(spend.get("elapsed_s", 0.0))
    best = snapshot.get("best_speedup")
    best_text = f"best {snapshot.get('best_id')} {fmt_speedup(best)}" if best is not None else (
        f"best {snapshot['best_id']}" if snapshot.get("best_id") else "no correct candidate yet")
    evals = _limit(spend.get("evals", 0), limits.get("max_evals"))
    if snapshot.get("mode") == "autotune":
        stored = f", {snapshot['stored_before']} from the store" if snapshot.get("stored_before") else ""
        what = f"{snapshot.get('candidates', 0)} instances ({evals} judged{stored}), {snapshot.get('passing', 0)} correct"
    elif snapshot.get("mode") == "import":
        what = f"{snapshot.get('candidates', 0)} imported candidates ({evals} judged), {snapshot.get('passing', 0)} correct"
    else:
        tuned = (snapshot.get("tuning") or {}).get("evals")
        what = (f"{snapshot.get('candidates', 0)} candidates, {max(0, snapshot.get('passing', 0))} correct, "
                f"{spend.get('calls', 0)} LLM calls, {evals} evaluations" + (f" ({tuned} tuning)" if tuned else ""))
    return f"[{seconds // 60}:{seconds % 60:02d}] {what}; {best_text}"
