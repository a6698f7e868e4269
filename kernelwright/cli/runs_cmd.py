"""`kernelwright runs list|show|rejudge`: what runs exist, what one of them did, and its candidates
judged again under another rule set.

Tables go to stdout; `--json` prints the same as JSON (stdout), warnings go to stderr. A run stored
as `running` whose process is gone (its run lock is free: killed, crashed) is shown as
`interrupted`, with the command that resumes it. Exit codes: 0; 2 for a run that does not exist or
bad input; 75 when a batch rejudge waits for verdicts.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax

from kernelwright.report.best import judged_on_text
from kernelwright.report.tables import candidate_tree, rules_table, run_summary, runs_table
from kernelwright.rules import UnknownRuleSet, get
from kernelwright.store import RunStore, StoreError, shown_status

from . import exits
from .ask_view import show_ask

runs_app = typer.Typer(help="List runs and show one run's search tree, spend and best candidate.",
                       no_args_is_help=True)
console = Console()
errors = Console(stderr=True)
RESUMABLE = ("interrupted", "paused", "failed")


def find_databases(folder: Path) -> list[Path]:
    """run.sqlite files in `folder` itself (a workspace database), in its sub-folders, and in the
    run folders of the suites among them (SUITE/suite.json)."""
    found = [folder / "run.sqlite"] if (folder / "run.sqlite").is_file() else []
    found += sorted(folder.glob("*/run.sqlite"))
    for manifest in sorted(folder.glob("*/suite.json")):
        found += sorted(manifest.parent.glob("*/run.sqlite"))
    return found


def open_run(target: str, folder: str):
    """(store, run) for a run folder, a run.sqlite path, or a run id under `folder`."""
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


def with_shown_status(run: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The run with the status a person should see (a dead `running` run is `interrupted`)."""
    status = shown_status(run["status"], run_dir)
    if status == run["status"]:
        return run
    return {**run, "status": status, "status_detail": "the process stopped without saying (kill -9, a crash)"}


def run_json(run: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """A run as `--json` prints it: no problem source, the resume command when there is one."""
    data = {k: v for k, v in run.items() if k != "problem_source"}
    data["run_dir"] = str(run_dir)
    data["resume"] = f"kernelwright optimize --resume {run_dir}" if run["status"] in RESUMABLE else None
    return data


@runs_app.command("list")
def list_runs(folder: str = typer.Option("kw-runs", "--dir", help="workspace folder holding run folders"),
              json_out: bool = typer.Option(False, "--json", help="print the runs as JSON")) -> None:
    """Every run under the workspace folder, newest last."""
    rows = []
    for db in find_databases(Path(folder)):
        try:
            with RunStore(db, create=False) as store:
                rows += [(db.parent, with_shown_status(run, db.parent)) for run in store.runs()]
        except (StoreError, Exception) as exc:  # noqa: BLE001 -- a broken file must not hide the others
            errors.print(f"[yellow]skipped {db}: {escape(str(exc))}[/]", soft_wrap=True)
    rows.sort(key=lambda item: item[1]["created"])
    if json_out:
        typer.echo(json.dumps([run_json(run, folder_) for folder_, run in rows], indent=2))
        return
    if not rows:
        console.print(f"no runs under {folder}")
        return
    console.print(runs_table(rows))


@runs_app.command("show")
def show_run(
    run: str = typer.Argument(..., help="run folder, its run.sqlite, or a run id"),
    folder: str = typer.Option("kw-runs", "--dir", help="workspace folder (to find a run by id)"),
    candidate: Optional[str] = typer.Option(None, "--candidate", help="print this candidate's code and verdict"),
    ask: Optional[str] = typer.Option(None, "--ask", help="print this stored ask (e.g. a7): a prompt as the model "
                                      "read it, or an evaluation; `--ask list` lists them"),
    json_out: bool = typer.Option(False, "--json", help="print the run (or the candidate) as JSON"),
) -> None:
    """One run: settings, status, spend, the search tree, and where the best candidate is."""
    try:
        store, info = open_run(run, folder)
    except StoreError as exc:
        errors.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    with store:
        info = with_shown_status(info, store.path.parent)
        if candidate:
            _show_candidate(store, info["id"], candidate, json_out)
            return
        if json_out:
            typer.echo(json.dumps(_run_record(store, info), indent=2))
            return
        if ask:
            raise typer.Exit(show_ask(store, info["id"], ask))
        console.print(run_summary(info))
        console.print(candidate_tree(store.candidates(info["id"])))
        verdict_rows = store.verdict_rows(info["id"])
        if len({row["rules"] for row in verdict_rows}) > 1:
            console.print(rules_table(verdict_rows))
        calls = store.llm_calls(info["id"])
        failed = sum(1 for c in calls if c["error_type"])
        asks = store.asks(info["id"])
        failed_asks = [a for a in asks if (a["result"] or {}).get("type") == "failure"]
        waiting = [a for a in asks if a["result"] is None]
        console.print(f"{len(calls)} LLM calls stored ({failed} failed); {len(asks)} asks in the replay log, "
                      f"{len(failed_asks)} failed, {len(waiting)} without an answer")
        for failed_ask in failed_asks[:5]:
            result = failed_ask["result"]
            message = escape(f"{result.get('kind')}: {result.get('message', '')[:160]}")
            console.print(f"  [red]{failed_ask['id']} ({failed_ask['agent'] or failed_ask['kind']}): {message}[/]")
        best = store.path.parent / "best_model_new.py"
        if best.is_file():
            console.print(f"best candidate file: {best}")
        if info["status"] in RESUMABLE:
            console.print(f"continue with: kernelwright optimize --resume {store.path.parent}", soft_wrap=True)


@runs_app.command("rejudge")
def rejudge_run(
    run: str = typer.Argument(..., help="run folder, its run.sqlite, or a run id"),
    rules: str = typer.Option(..., "--rules", help="rule set to judge the run's candidates by: kernelbench, "
                              "library or strict"),
    eval_mode: str = typer.Option("local", "--eval", help="local (judge here) or batch (requests in "
                                  "RUN_DIR/rejudge-RULES for `kernelwright judge --batch`; run again to collect)"),
    folder: str = typer.Option("kw-runs", "--dir", help="workspace folder (to find a run by id)"),
    no_time: bool = typer.Option(False, "--no-time", help="correctness and rules only: no timing, no baselines"),
    workers: int = typer.Option(1, "--eval-workers", help="judge processes at once without a GPU"),
    candidates: Optional[str] = typer.Option(None, "--candidates", help="only these candidate ids (comma-separated)"),
) -> None:
    """Judge a run's correct candidates again under another rule set; verdicts are stored per rule set."""
    from kernelwright.search.drivers.rejudge import RejudgeOptions, rejudge  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start
    from kernelwright.search.drivers.session import RunError  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start

    try:
        get(rules)
        store, info = open_run(run, folder)
        store.close()
        outcome = rejudge(RejudgeOptions(str(store.path), rules, eval_mode, workers, not no_time,
                                         [c.strip() for c in (candidates or "").split(",") if c.strip()]),
                          log=lambda line: console.print(escape(line)))
    except UnknownRuleSet as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    except (StoreError, RunError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    for cid, why in sorted(outcome.skipped.items()):
        console.print(f"[dim]skipped {cid}: {escape(why)}[/]", soft_wrap=True)
    if outcome.pending:
        console.print(f"[yellow]{len(outcome.pending)} request(s) wait in {outcome.folder}[/]: run `kernelwright "
                      f"judge --batch {outcome.folder}` where the GPU is, then this command again", soft_wrap=True)
        raise typer.Exit(exits.EXIT_PAUSED)
    with RunStore(store.path, create=False) as again:
        console.print(rules_table(again.verdict_rows(info["id"])))


def _run_record(store, info: dict[str, Any]) -> dict[str, Any]:
    run_id = info["id"]
    asks = store.asks(run_id)
    best = store.path.parent / "best_model_new.py"
    candidates = [{k: row.get(k) for k in ("id", "parent_id", "search_parent", "action", "status", "plan",
                                            "approach_key", "speedup", "value", "visits", "depth", "reason")}
                  for row in store.candidates(run_id)]
    return {**run_json(info, store.path.parent), "candidates": candidates,
            "asks": {"total": len(asks), "failed": sum(1 for a in asks if (a["result"] or {}).get("type") == "failure"),
                     "unanswered": sum(1 for a in asks if a["result"] is None)},
            "llm_calls": len(store.llm_calls(run_id)),
            "best_file": str(best) if best.is_file() else None}


def _show_candidate(store, run_id: str, candidate_id: str, json_out: bool = False) -> None:
    row = store.candidate(run_id, candidate_id)
    if row is None:
        errors.print(f"[red]run {run_id} has no candidate {candidate_id}[/]")
        raise typer.Exit(exits.EXIT_USAGE)
    tuning = (row.get("node") or {}).get("tuning") or {}
    if json_out:
        record = {k: v for k, v in row.items() if k != "node"}
        typer.echo(json.dumps({**record, "tuning": tuning or None, "verdict": store.verdict(run_id, candidate_id)},
                              indent=2))
        return
    console.print(f"[bold]{row['id']}[/] {row['action']} of {row['parent_id']}: {row['status']}")
    if row.get("plan"):
        console.print(row["plan"])
    if tuning:
        console.print(tuning_text(tuning), highlight=False)
    if row.get("reason"):
        console.print(f"[red]{escape(row['reason'])}[/]")
    where = ((store.verdict(run_id, candidate_id) or {}).get("environment") or {}).get("judged_on")
    if where:
        console.print(f"judged on: {judged_on_text(where)}", highlight=False)
    if row.get("code"):
        console.print(Syntax(row["code"], "python", line_numbers=True))


def tuning_text(tuning: dict[str, Any]) -> str:
    """What the search's tuning step did with a candidate (or an instance), for `runs show --candidate`."""
    if "of" in tuning:
        params = ", ".join(f"{k}={v}" for k, v in (tuning.get("params") or {}).items())
        return f"instance of {tuning['of']}'s template ({tuning.get('job')}): {params}"
    cost = tuning.get("cost") or {}
    spent = (f"; cost: {cost.get('evaluations', 0)} evaluation(s), {cost.get('templatizer_calls', 0)} Templatizer "
             f"call(s), {cost.get('device_s', 0.0):.1f} {cost.get('device_label', 'device-seconds')}") if cost else ""
    return f"tuning ({tuning.get('job')}): {tuning.get('outcome', '')}{spent}"


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
