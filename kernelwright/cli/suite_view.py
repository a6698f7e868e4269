"""What `kernelwright optimize SUITE` shows: live progress of every run (a rich table on a terminal,
one line per change otherwise, both on stderr), the summary table and the `--json` result."""
from __future__ import annotations

import threading
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from kernelwright.report.best import fmt_speedup
from kernelwright.report.progress import progress_line

from .heartbeat import run_activity


def _cells(snapshot: dict[str, Any]) -> tuple[str, str, str, str]:
    spend = snapshot.get("spend") or {}
    best = snapshot.get("best_speedup")
    best_text = f"{fmt_speedup(best)} ({snapshot.get('best_id')})" if best is not None else "-"
    evals = f"{spend.get('evals', 0)}" + (f" / {snapshot['limits']['max_evals']}"
                                          if (snapshot.get("limits") or {}).get("max_evals") else "")
    return (f"{snapshot.get('candidates', 0)} ({max(0, snapshot.get('passing', 0))} correct)", evals,
            f"{spend.get('calls', 0)}", best_text)


class SuiteProgress:
    """Collects each run's latest snapshot (from any thread) and shows them."""

    def __init__(self, console: Console, names: list[str], beat=None):
        self.console = console
        self.snapshots: dict[str, dict] = {name: {} for name in names}
        self.lock = threading.Lock()
        self.live: Live | None = None
        self._last: dict[str, Any] = {}
        self.beat = beat  # cli.heartbeat.Heartbeat: a line after a long silence, saying what the runs do

    def activity(self) -> str:
        """What the runs still going do, one clause per run."""
        going = [f"{name} {run_activity(snap)}" for name, snap in self.snapshots.items()
                 if snap and not snap.get("done")]
        return "; ".join(going) if going else "preparing the runs"

    def table(self) -> Table:
        table = Table(title=f"suite: {len(self.snapshots)} problems", expand=False)
        for column in ("problem", "candidates", "evaluations", "LLM calls", "best"):
            table.add_column(column)
        done = 0
        for name, snapshot in self.snapshots.items():
            if snapshot.get("best_speedup") is not None:
                done += 1
            table.add_row(escape(name), *(_cells(snapshot) if snapshot else ("waiting", "", "", "")))
        table.caption = f"{done} of {len(self.snapshots)} with a correct candidate"
        return table

    def __call__(self, name: str, snapshot: dict) -> None:
        with self.lock:
            self.snapshots[name] = snapshot
            if self.beat is not None:
                self.beat.doing(self.activity())
            if self.live is not None:
                self.live.update(self.table())
                return
            spend = snapshot.get("spend") or {}
            state = (snapshot.get("candidates"), snapshot.get("best_id"), spend.get("evals"), spend.get("calls"))
            if self._last.get(name) != state:
                self._last[name] = state
                self.console.print(f"{name}: {progress_line(snapshot)}", soft_wrap=True, highlight=False,
                                   markup=False)
                if self.beat is not None:
                    self.beat.printed()

    def __enter__(self) -> "SuiteProgress":
        if self.console.is_terminal:
            self.live = Live(self.table(), console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        if self.beat is not None:
            self.beat.doing(self.activity())
            self.beat.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.beat is not None:
            self.beat.__exit__(*exc)
        if self.live is not None:
            self.live.__exit__(*exc)
            self.live = None


def summary_table(outcome) -> Table:
    """One row per problem of a finished (or paused) suite."""
    table = Table(title=f"suite {outcome.suite_dir}")
    for column in ("problem", "status", "best", "run folder"):
        table.add_column(column, overflow="fold")
    for entry, result in outcome.results:
        if isinstance(result, Exception):
            table.add_row(escape(entry.name), "[red]error[/]", escape(str(result)[:120]), "-")
            continue
        best = fmt_speedup(result.best_speedup) if result.best_speedup is not None else "-"
        style = {"done": "green", "paused": "yellow", "interrupted": "yellow"}.get(result.status, "red")
        table.add_row(escape(entry.name), f"[{style}]{result.status}[/]", best, escape(str(result.run_dir)))
    return table


def closing_lines(outcome) -> list[str]:
    """What to do next: the shared batch folder or prompts, and the one resume command."""
    lines = []
    evals, prompts = outcome.pending_evals(), outcome.pending_prompts()
    if evals:
        folders = sorted({str(p.parent) if p.suffix == ".json" else str(p) for p in evals})
        lines.append(f"{len(evals)} evaluation(s) pending in {', '.join(folders)}: run `kernelwright judge --batch "
                     f"{folders[0]}` (or `python -m kernelwright.judge.scheduling.batch {folders[0]}`) where the GPU is")
    if prompts:
        lines.append(f"{len(prompts)} prompt(s) wait for answers in {prompts[0].parent}")
    if evals or prompts or outcome.exit_code in (75, 130):
        lines.append(f"then: {outcome.resume_command()}")
    lines.append(f"suite folder: {outcome.suite_dir} (report: kernelwright report {outcome.suite_dir})")
    return lines


def suite_json(outcome) -> dict[str, Any]:
    items = []
    for entry, result in outcome.results:
        if isinstance(result, Exception):
            items.append({"problem": entry.problem, "name": entry.name, "status": "error", "detail": str(result),
                          "exit_code": 1})
        else:
            items.append({"problem": entry.problem, "name": entry.name, "level": entry.level, **result.to_dict()})
    return {"suite_dir": str(outcome.suite_dir), "suite_id": outcome.manifest.id, "exit_code": outcome.exit_code,
            "resume": outcome.resume_command() if outcome.exit_code in (75, 130, 1) else None,
            "pending_evals": len(outcome.pending_evals()), "pending_prompts": len(outcome.pending_prompts()),
            "suite": items}
