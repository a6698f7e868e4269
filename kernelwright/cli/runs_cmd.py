"""`kernelwright runs list|show`: what runs exist, and what one of them did."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

runs_app = typer.Typer(help="List runs and show one run's search tree, spend and best candidate.",
                       no_args_is_help=True)
console = Console()


def find_databases(folder: Path) -> list[Path]:
    """run.sqlite files in `folder` itself (a workspace database) and in its sub-folders."""
    found = [folder / "run.sqlite"] if (folder / "run.sqlite").is_file() else []
    found += sorted(folder.glob("*/run.sqlite"))
    return found


def open_run(target: str, folder: str):
    """(store, run) for a run folder, a run.sqlite path, or a run id under `folder`."""
    from kernelwright.store import RunStore, StoreError

    path = Path(target)
    if path.is_file():
        store = RunStore(path, create=False)
        return store, store.run()
    if (path / "run.sqlite").is_file():
        store = RunStore.in_dir(path, create=False)
        return store, store.run()
    for db in find_databases(Path(folder)):
        store = RunStore(db, create=False)
        for run in store.runs():
            if run["id"] == target or run["id"].startswith(target):
                return store, run
        store.close()
    raise StoreError(f"no run {target!r}: give a run folder, its run.sqlite, or a run id under {folder}")


@runs_app.command("list")
def list_runs(folder: str = typer.Option("kw-runs", "--dir", help="workspace folder holding run folders")) -> None:
    """Every run under the workspace folder, newest last."""
    from kernelwright.report.tables import runs_table
    from kernelwright.store import RunStore, StoreError

    rows = []
    for db in find_databases(Path(folder)):
        try:
            with RunStore(db, create=False) as store:
                rows += [(db.parent, run) for run in store.runs()]
        except (StoreError, Exception) as exc:  # a broken file must not hide the others
            console.print(f"[yellow]skipped {db}: {escape(str(exc))}[/]", soft_wrap=True)
    if not rows:
        console.print(f"no runs under {folder}")
        return
    rows.sort(key=lambda item: item[1]["created"])
    console.print(runs_table(rows))


@runs_app.command("show")
def show_run(
    run: str = typer.Argument(..., help="run folder, its run.sqlite, or a run id"),
    folder: str = typer.Option("kw-runs", "--dir", help="workspace folder (to find a run by id)"),
    candidate: Optional[str] = typer.Option(None, "--candidate", help="print this candidate's code and verdict"),
) -> None:
    """One run: settings, status, spend, the search tree, and where the best candidate is."""
    from kernelwright.report.tables import candidate_tree, run_summary
    from kernelwright.store import StoreError

    try:
        store, info = open_run(run, folder)
    except StoreError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(1) from None
    with store:
        if candidate:
            _show_candidate(store, info["id"], candidate)
            return
        console.print(run_summary(info))
        console.print(candidate_tree(store.candidates(info["id"])))
        calls = store.llm_calls(info["id"])
        failed = sum(1 for c in calls if c["error_type"])
        asks = store.asks(info["id"])
        failed_asks = [a for a in asks if (a["result"] or {}).get("type") == "failure"]
        waiting = [a for a in asks if a["result"] is None]
        console.print(f"{len(calls)} LLM calls stored ({failed} failed); {len(asks)} asks in the replay log, "
                      f"{len(failed_asks)} failed, {len(waiting)} without an answer")
        for ask in failed_asks[:5]:
            message = escape(f"{ask['result'].get('kind')}: {ask['result'].get('message', '')[:160]}")
            console.print(f"  [red]{ask['id']} ({ask['agent'] or ask['kind']}): {message}[/]")
        best = store.path.parent / "best_model_new.py"
        if best.is_file():
            console.print(f"best candidate file: {best}")


def _show_candidate(store, run_id: str, candidate_id: str) -> None:
    from rich.syntax import Syntax

    row = store.candidate(run_id, candidate_id)
    if row is None:
        console.print(f"[red]run {run_id} has no candidate {candidate_id}[/]")
        raise typer.Exit(1)
    console.print(f"[bold]{row['id']}[/] {row['action']} of {row['parent_id']}: {row['status']}")
    if row.get("plan"):
        console.print(row["plan"])
    if row.get("reason"):
        console.print(f"[red]{escape(row['reason'])}[/]")
    where = ((store.verdict(run_id, candidate_id) or {}).get("environment") or {}).get("judged_on")
    if where:
        from kernelwright.report.best import judged_on_text

        console.print(f"judged on: {judged_on_text(where)}", highlight=False)
    if row.get("code"):
        console.print(Syntax(row["code"], "python", line_numbers=True))


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
