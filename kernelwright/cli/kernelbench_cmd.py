"""`kernelwright kernelbench export|import`: KernelBench's run layout (interop/kernelbench.py).

    kernelwright kernelbench export kw-runs/<suite> --out kb-export --name kw_suite
        # best correct candidates as KernelBench runs/<name>_level<L>_<backend>/level_L_problem_N_sample_0_kernel.py
    kernelwright kernelbench import KernelBench/runs/my_run --problems ../shared/kernelbench --run-dir kw-runs/imported
        # every generated kernel judged by our judge as a candidate of its problem: a suite of runs,
        # `kernelwright report` and `kernelwright optimize --resume` work on it

Exit codes as everywhere (docs/cli.md): 0 done, 1 a run failed, 2 bad input, 75 verdicts pending
(--eval batch), 130 interrupted.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.interop.kernelbench import EXPORT_MANIFEST, export_best, find_generations, group
from kernelwright.store.suite import SuiteError, new_manifest, write_manifest

from . import exits
from .optimize_cmd import EnvironmentMissing, UsageError, build_options, check_environment, run_suite as show_suite
from .report_cmd import gather

kb_app = typer.Typer(help="KernelBench's run layout: export our best candidates, import generated kernels.",
                     no_args_is_help=True)
console = Console(stderr=True)
results = Console()


@kb_app.command("export")
def export(
    target: str = typer.Argument(..., help="a suite folder, a run folder or a workspace"),
    out: str = typer.Option(..., "--out", help="folder to write runs/<name>_level<L>_<backend>/ into"),
    name: str = typer.Option("kernelwright", "--name", help="KernelBench run name prefix"),
    rules: Optional[str] = typer.Option(None, "--rules", help="export the best candidate under this rule set "
                                        "(default: the one each run searched with)"),
    json_out: bool = typer.Option(False, "--json", help="print what was exported as JSON"),
) -> None:
    """Write each problem's best correct candidate in KernelBench's run layout, with the commands
    that make KernelBench's own eval script judge them."""
    try:
        problems, _, _ = gather(target)
    except SuiteError as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    done = export_best(problems, out, name, rules)
    for item in done.exported:
        results.print(f"{item.file}  <- {item.run_dir} {item.candidate}", soft_wrap=True, highlight=False)
    for problem, why in done.skipped.items():
        console.print(f"skipped {problem}: {why}", soft_wrap=True, highlight=False)
    console.print(f"{len(done.exported)} kernel(s) in {out}; commands in {Path(out) / 'README.md'}, "
                  f"details in {Path(out) / EXPORT_MANIFEST}", soft_wrap=True, highlight=False)
    if json_out:
        typer.echo(json.dumps(json.loads((Path(out) / EXPORT_MANIFEST).read_text()), indent=1))
    raise typer.Exit(exits.EXIT_OK)


@kb_app.command("import")
def import_(
    generations: str = typer.Argument(..., help="a KernelBench run folder (level_L_problem_N_sample_S_kernel.py)"),
    problems: str = typer.Option(..., "--problems", help="KernelBench problems: a folder with level1/, level2/ ..."),
    level: Optional[int] = typer.Option(None, "--level", help="only this level's kernels"),
    run_dir: Optional[str] = typer.Option(None, "--run-dir", help="the suite folder (default WORKSPACE/SUITE_ID)"),
    workspace: str = typer.Option("kw-runs", "--workspace", help="folder that holds run folders"),
    eval_mode: str = typer.Option("local", "--eval", help="local (judge here) or batch (requests in SUITE/evals)"),
    set_: list[str] = typer.Option([], "--set", help="judge.FIELD=value or a problem size constant; repeatable"),
    rules: Optional[str] = typer.Option(None, "--rules", help="rule set: kernelbench (default), library, strict"),
    eval_workers: int = typer.Option(1, "--eval-workers", help="judge processes at once without a GPU"),
    quiet: bool = typer.Option(False, "--quiet", help="no live progress"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON on stdout"),
) -> None:
    """Judge a KernelBench generations folder with our judge: one run per problem, one suite."""
    from kernelwright.search.drivers import modes  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start
    from kernelwright.search.drivers import suite as driver  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start
    from kernelwright.search.drivers.imported import create_imported_run  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start
    from kernelwright.search.drivers.session import RunError, prepare_run_dir  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start

    folder = Path(generations)
    if not folder.is_dir():
        console.print(f"[red]{generations}: not a folder[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    by_problem, skipped = group(find_generations(folder, level), problems)
    by_problem = {path.resolve(): kernels for path, kernels in by_problem.items()}
    for kernel, why in skipped.items():
        console.print(f"skipped {kernel}: {why}", soft_wrap=True, highlight=False)
    if not by_problem:
        console.print(f"[red]no kernel file of {folder} matches a problem under {problems}[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    try:
        options = build_options(problem=None, resume=None, llm=None, llm_roles=[], backend=None, strategy=None,
                                limits={}, sets=set_, run_dir=None, eval_mode=eval_mode, config_file=None,
                                workspace=workspace, skill_dirs=[], eval_workers=eval_workers, seed=0, rules=rules)
        if eval_mode not in ("local", "batch"):
            raise UsageError(f"--eval must be local or batch, not {eval_mode!r}")
        check_environment(options.backend, eval_mode, options.judge.device)
        manifest = new_manifest(modes.IMPORT, eval_mode, sorted(by_problem), folder.name, note=f"imported from {folder}")
        suite_dir = driver.suite_dir_for(_with_run_dir(options, run_dir), folder.name, manifest)
        if (suite_dir / "suite.json").exists():
            raise UsageError(f"{suite_dir} already holds a suite; resume it with kernelwright optimize --resume "
                             f"{suite_dir}")
        prepare_run_dir(_with_run_dir(options, run_dir), suite_dir)
        write_manifest(suite_dir, manifest)
        for entry in manifest.entries:
            run_options = _with_run_dir(options, str(suite_dir / entry.name))
            run_options.problem, run_options.batch_dir = entry.problem, "../evals"
            run_options.request_prefix = entry.request_prefix
            create_imported_run(run_options, by_problem[Path(entry.problem)], str(folder))
    except (UsageError, RunError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE) from None
    except Exception as exc:  # noqa: BLE001 - a missing compiler or package: said, exit 1
        if isinstance(exc, EnvironmentMissing):
            console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
            raise typer.Exit(exits.EXIT_FAILED) from None
        raise
    with exits.sigterm_interrupts():
        code = show_suite([], options, quiet, json_out=json_out, resume=str(suite_dir))
    raise typer.Exit(code)


def _with_run_dir(options, run_dir: str | None):
    return dataclasses.replace(options, run_dir=run_dir)


def register(app: typer.Typer) -> None:
    app.add_typer(kb_app, name="kernelbench")
