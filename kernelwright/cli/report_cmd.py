"""`kernelwright report RUN_OR_SUITE_OR_WORKSPACE`: the results table, as JSON, Markdown and one
self-contained HTML page (report/leaderboard.py says what is in it).

    kernelwright report kw-runs/<suite-id>                 # -> kw-runs/<suite-id>/report/report.{json,md,html}
    kernelwright report kw-runs --out results/ --title "level 1"
    kernelwright report RUN --kernelbench ../shared/kernelbench/baseline_times   # published baselines beside ours

Exit codes: 0 written; 2 nothing to report (no run there) or bad input. The results (a table of
the problems, the overall figures, the paths written) go to stdout; with `--json` the report's data
goes there instead and the paths written to stderr.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelwright.report.metrics import BASELINE_LABELS
from kernelwright.report.published import default_baseline_root, load_baselines
from kernelwright.store import RunStore, StoreError
from kernelwright.store.suite import BATCH_DIR, SuiteError, find_runs

from . import exits

console = Console(stderr=True)  # with --json: the paths written
results = Console()  # the results table and the paths written (stdout)


def gather(target: str | Path):
    """(problems, manifest, pending per problem) for a suite folder, a run folder or a workspace.
    A suite's problems are named and grouped as its manifest says; a run outside a suite is named
    after its problem (with its folder's name where several runs of one problem are shown) and
    placed in its KernelBench level when its problem file lies in one (`level1/`), else in none."""
    from kernelwright.report.collect import collect_problem, level_of, not_started  # noqa: PLC0415 -- report/collect.py (cells.py and leaderboard.py import it) pulls the judge's memory ledger and outcome text (20-40 ms): kept out of the CLI's start

    found, manifest = find_runs(target)
    problems = []
    for item in found:
        entry = item.entry
        name = entry.name if entry else item.run_dir.name
        level = entry.level if entry else "-"
        if not (item.run_dir / "run.sqlite").is_file():
            problems.append(not_started(name, level, entry.problem if entry else "", str(item.run_dir),
                                        entry.error if entry else ""))
            continue
        try:
            with RunStore.in_dir(item.run_dir, create=False) as store:
                run = store.run()
                if entry is None:
                    name, level = run["problem_name"] or name, level_of(run["problem_path"])
                problems.append(collect_problem(store, run["id"], name, level, str(item.run_dir)))
        except StoreError as exc:
            problems.append(not_started(name, level, entry.problem if entry else "", str(item.run_dir), str(exc)))
    if manifest is None:
        _distinct_names(problems)
    waiting = _pending(target, found, manifest)
    return problems, manifest, {p.name: waiting[p.run_dir] for p in problems if p.run_dir in waiting}


def _distinct_names(problems: list) -> None:
    """Several runs of one problem (a workspace): each named after its problem and its folder."""
    counts = Counter(p.name for p in problems)
    for p in problems:
        if counts[p.name] > 1:
            p.name = f"{p.name} ({Path(p.run_dir).name})"


def _pending(target, found, manifest) -> dict[str, int]:
    """Requests without a verdict, per run folder: the suite's shared batch folder, or each run's own."""
    from kernelwright.judge.scheduling.batch import pending  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of the CLI's start

    out: dict[str, int] = {}
    if manifest is not None:
        folder = Path(target) / BATCH_DIR
        waiting = [p.name for p in pending(folder)] if folder.is_dir() else []
        for item in found:
            out[str(item.run_dir)] = sum(1 for name in waiting if name.startswith(item.entry.request_prefix))
        return out
    for item in found:
        folder = item.run_dir / "evals"
        if folder.is_dir():
            out[str(item.run_dir)] = len(pending(folder))
    return out


def report(
    target: str = typer.Argument(..., help="a suite folder, a run folder, or a workspace of runs"),
    out: Optional[str] = typer.Option(None, "--out", help="folder for report.json, report.md, report.html "
                                      "(default TARGET/report)"),
    title: Optional[str] = typer.Option(None, "--title", help="the page's title (default: the folder's name)"),
    kernelbench: Optional[str] = typer.Option(None, "--kernelbench", help="KernelBench's baseline_times folder: "
                                              "its published H100 baselines are shown beside ours (default: "
                                              "$KW_KERNELBENCH/baseline_times or ../shared/kernelbench/baseline_times)"),
    hardware: str = typer.Option("H100_Modal", "--hardware", help="sub-folder of baseline_times to show"),
    json_out: bool = typer.Option(False, "--json", help="print the report's data as JSON on stdout"),
) -> None:
    """Results table of a run, a suite or a workspace: per level and overall, per rule set."""
    from kernelwright.report.leaderboard import build_report, write_report  # noqa: PLC0415 -- report/collect.py (cells.py and leaderboard.py import it) pulls the judge's memory ledger and outcome text (20-40 ms): kept out of the CLI's start

    try:
        problems, manifest, pending = gather(target)
    except SuiteError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    published = load_baselines(kernelbench or default_baseline_root(), hardware)
    built = build_report(problems, title=title or Path(target).resolve().name, target=str(target),
                         made_with=manifest.kernelwright if manifest else "", pending=pending, published=published)
    folder = Path(out) if out else (Path(target) if Path(target).is_dir() else Path(target).parent) / "report"
    paths = write_report(built, folder)
    out = console if json_out else results
    if not json_out:
        results.print(results_table(built))
        for line in overall_lines(built):
            results.print(escape(line), soft_wrap=True, highlight=False)
    for kind, path in paths.items():
        out.print(f"{kind}: {path}", soft_wrap=True, highlight=False)
    if json_out:
        typer.echo(json.dumps(built.to_dict(), indent=1, default=str))
    raise typer.Exit(exits.EXIT_OK)


SHOWN = ("problem", "level", "run", "result", "best", "× eager", "× torch.compile")


def results_table(built) -> Table:
    """The problems under the rule set searched with, as the report's own columns say them."""
    from kernelwright.report.cells import problem_columns  # noqa: PLC0415 -- report/collect.py (cells.py and leaderboard.py import it) pulls the judge's memory ledger and outcome text (20-40 ms): kept out of the CLI's start

    rules = built.rule_sets[0]
    columns = [(header, cell) for header, cell in problem_columns(rules, built.pending) if header in SHOWN]
    table = Table(title=f"{built.title}: {len(built.problems)} problem(s) under {rules}")
    for header, _ in columns:
        table.add_column(header, no_wrap=header == "problem", overflow="fold")
    for problem in built.problems:
        table.add_row(*(escape(cell(problem)) for _, cell in columns))
    return table


def overall_lines(built) -> list[str]:
    """Per rule set: how many problems were judged and correct, the geomeans that were measured."""
    from kernelwright.report.cells import pct, times  # noqa: PLC0415 -- report/collect.py (cells.py and leaderboard.py import it) pulls the judge's memory ledger and outcome text (20-40 ms): kept out of the CLI's start
    from kernelwright.report.leaderboard import ALL  # noqa: PLC0415 -- report/collect.py (cells.py and leaderboard.py import it) pulls the judge's memory ledger and outcome text (20-40 ms): kept out of the CLI's start

    lines = []
    for rules in built.rule_sets:
        summary = built.summaries[rules][ALL]
        parts = [f"{summary.judged} of {summary.n} judged, {summary.correct} correct ({pct(summary.correct_rate)})"]
        for baseline, stats in summary.by_baseline.items():
            if stats.geomean_correct is not None:
                parts.append(f"geomean vs {BASELINE_LABELS[baseline]} {times(stats.geomean_correct)} (correct only)")
        lines.append(f"{rules}: " + "; ".join(parts))
    return lines + [f"note: {note}" for note in built.notes]


def register(app: typer.Typer) -> None:
    app.command("report")(report)
