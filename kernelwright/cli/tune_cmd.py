"""`kernelwright tune TEMPLATE --problem P`: search a template's parameters with the judge.

TEMPLATE is a template file (a candidate with a KW_TUNE declaration, see docs/tuning.md), the
word `library` to build one from the built-in template library for the problem, or `reference` to
tune the launch configuration of a reference that is a Triton or CUDA kernel itself
(tune/from_reference.py). Every instance is
judged in its own process; results are cached per (template, parameters, device, sizes).

Exit codes: 0 an instance passed (the best is written to --out), 1 none passed, 2 a usage error,
a template that cannot be read, or a problem no library template covers.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelwright.cli.judge_cmd import parse_overrides
from kernelwright.judge import JudgeConfig
from kernelwright.problem import ProblemError, load_problem
from kernelwright.problem.loader import read_source
from kernelwright.rules import UnknownRuleSet, get
from kernelwright.tune.budget import sweep_budget
from kernelwright.tune.cache import TuneCache
from kernelwright.tune.prune import prune_space
from kernelwright.tune.seeds import SeedCache
from kernelwright.tune.strategies import CHOICES
from kernelwright.tune.template import TemplateError, load_template

from . import exits

console = Console()


def register(app: typer.Typer) -> None:
    app.command("tune")(tune_command)


def tune_command(
    template_path: str = typer.Argument(..., metavar="CANDIDATE_TEMPLATE",
                                        help="template file, `library` for a built-in template, or `reference` "
                                        "for the launch configuration of a reference that is a Triton/CUDA kernel"),
    problem: Path = typer.Option(..., "--problem", "-p", help="KernelBench-format problem file"),
    strategy: str = typer.Option("auto", "--strategy", "-s",
                                 help=" | ".join(CHOICES) + " (auto: exhaustive if the budget covers the space, else tpe)"),
    budget: Optional[int] = typer.Option(None, "--budget", "-b",
                                         help="most instances to judge (default: all feasible)"),
    workers: int = typer.Option(1, "--workers", "-j", help="instances judged at once"),
    sweep: int = typer.Option(0, "--sweep", help="benchmark N configurations inside one judge evaluation and "
                              "judge each batch's fastest in full; --budget then counts judge evaluations"),
    seed: int = typer.Option(0, "--seed", help="seed of the random and optuna strategies"),
    settings: list[str] = typer.Option([], "--set", help="size override name=value (repeatable)"),
    device: str = typer.Option("auto", "--device", help="auto | cuda | cpu"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="where to write the best instance"),
    no_cache: bool = typer.Option(False, "--no-cache", help="measure again even when cached, and start the "
                                  "search without the seeds of earlier tunings"),
    prune_only: bool = typer.Option(False, "--prune-only", help="show the prune report and stop"),
    json_out: bool = typer.Option(False, "--json", help="print the tuning result as JSON"),
    rules: Optional[str] = typer.Option(None, "--rules", help="rule set the judge applies: kernelbench (default), "
                                        "library or strict"),
) -> None:
    """Tune a kernel template's parameters against PROBLEM with the judge."""
    if strategy not in CHOICES:
        raise typer.BadParameter(f"choose one of {', '.join(CHOICES)}", param_hint="--strategy")
    config = _judge_config(settings, device, rules)
    try:
        template = _load(template_path, problem, config)
    except (TemplateError, ValueError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None
    raise typer.Exit(_run(template, template_path, problem, config, strategy, budget, workers, seed,
                          out, no_cache, prune_only, json_out, sweep=sweep))


def _judge_config(settings: list[str], device: str, rules: str | None = None):
    try:
        rule_set = get(rules).name
    except UnknownRuleSet as exc:
        raise typer.BadParameter(str(exc), param_hint="--rules") from None
    # baselines are the same for every instance and add nothing to a comparison between them
    return JudgeConfig(overrides=parse_overrides(settings), device=device, baselines=(), rules=rule_set)


def _load(template_path: str, problem: Path, config):
    if template_path == "reference":
        from kernelwright.tune.from_reference import templatize_reference  # noqa: PLC0415 -- tune/library/ imports torch at its top (1-2 s): kept out of the CLI's start
        from kernelwright.tune.library import NoTemplate  # noqa: PLC0415 -- tune/library/ imports torch at its top (1-2 s): kept out of the CLI's start

        try:
            return templatize_reference(read_source(problem)[1], problem.stem).template
        except (ProblemError, NoTemplate) as exc:
            raise ValueError(str(exc)) from None
    if template_path != "library":
        return load_template(template_path)
    from kernelwright.tune.autopilot import has_gpu  # noqa: PLC0415 -- tune/library/ imports torch at its top (1-2 s): kept out of the CLI's start
    from kernelwright.tune.library import NoTemplate, build_template  # noqa: PLC0415 -- tune/library/ imports torch at its top (1-2 s): kept out of the CLI's start

    shrink = config.shrink if config.shrink is not None else not has_gpu()
    try:
        loaded = load_problem(problem, overrides=config.overrides, shrink=shrink)
        return build_template(loaded, allow_tf32=config.allow_tf32).template
    except (ProblemError, NoTemplate) as exc:
        raise ValueError(str(exc)) from None


def _run(template, template_path, problem, config, strategy, budget, workers, seed, out, no_cache,
         prune_only, json_out, sweep: int = 0) -> int:
    from kernelwright.tune.evaluate import JudgeEvaluator  # noqa: PLC0415 -- it loads profile/ (23 modules, 60 ms): kept out of the CLI's start
    from kernelwright.tune.tuner import tune_groupwise  # noqa: PLC0415 -- it loads profile/ (23 modules, 60 ms): kept out of the CLI's start

    if prune_only:
        report = prune_space(template)
        _print_prune(report, template)
        return exits.EXIT_OK if report.feasible else exits.EXIT_FAILED
    cache = None if no_cache else TuneCache()
    seeds = None if no_cache else SeedCache()  # where the search starts: this template's best measured before
    runs, batch = None, workers
    if sweep > 1:  # the budget counts judge evaluations: a sweep and its winner's judgement are two
        from kernelwright.tune.sweep_eval import SweepEvaluator  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of the CLI's start

        evaluator = SweepEvaluator(problem, config, workers=workers, cache=cache)
        runs, budget, batch = budget, sweep_budget(budget, sweep), sweep
    else:
        evaluator = JudgeEvaluator(problem, config, workers=workers, cache=cache)

    def show(trial) -> None:
        if not json_out:
            changed = {k: v for k, v in trial.params.items() if template.defaults.get(k) != v} or "defaults"
            console.print(f"{trial.index:>3}  {changed}  {escape(trial.measurement.summary())}", highlight=False)

    try:
        result = tune_groupwise(template, evaluator, strategy=strategy, budget=budget, seed=seed, batch=batch,
                                first=[template.defaults], on_result=show, max_runs=runs, seeds=seeds)
    except ValueError as exc:  # e.g. a strategy whose package is missing
        console.print(f"[red]{escape(str(exc))}[/]")
        return exits.EXIT_USAGE
    if json_out:
        console.print_json(json.dumps(result.to_dict(), default=str))
    else:
        _print_prune(result.prune, template)
    best = result.best
    if best is None:
        console.print("[red]no instance passed the judge[/]")
        return exits.EXIT_FAILED
    target = out or _default_out(template_path, template.name)
    target.write_text(template.instantiate(best.params))
    if not json_out:
        console.print(f"[green]best[/]: {best.params} -> {escape(best.measurement.summary())}", highlight=False)
        console.print(f"written to {target}", soft_wrap=True, highlight=False)
    return exits.EXIT_OK


def _default_out(template_path: str, name: str) -> Path:
    if template_path in ("library", "reference"):
        return Path(f"{''.join(c if c.isalnum() else '_' for c in name)}.best.py")
    path = Path(template_path)
    return path.with_name(path.stem + ".best.py")


def _print_prune(report, template) -> None:
    console.print(f"space: {template.space_size} configurations, {len(report.feasible)} feasible, "
                  f"{len(report.pruned)} pruned before compiling, {len(report.after_compile)} after",
                  highlight=False)
    if report.implicit:
        console.print(f"implicit constraints: {'; '.join(report.implicit)}", highlight=False)
    for reason, count in sorted(report.reasons().items(), key=lambda kv: -kv[1])[:10]:
        console.print(f"  {count:>5} pruned: {escape(reason)}", highlight=False)
    for item in report.after_compile[:10]:
        console.print(f"  pruned after compiling {item.params}: {escape(item.reason)}", highlight=False)
