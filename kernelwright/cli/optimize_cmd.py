"""`kernelwright optimize PROBLEM_OR_SUITE`: search for a faster verified ModelNew.

Exit status: 0 done, 1 failed, 2 bad usage, 75 paused (exchange prompts wait for answers, or
batch evaluations wait for verdicts; continue with `--resume RUN_DIR`).
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import os
import tomllib
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.live import Live
from rich.table import Table

from kernelwright.judge.config import JudgeConfig
from kernelwright.llm.errors import ConfigError
from kernelwright.report.best import fmt_speedup
from kernelwright.search.budget import LIMIT_NAMES, Limits
from kernelwright.search.settings import STRATEGIES, Settings, SettingsError, names as setting_names

console = Console(stderr=True)
SUITE_LIST_SUFFIXES = (".txt", ".list")


class UsageError(ValueError):
    """A flag or config value is wrong; shown to the user as is."""


def _pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for text in values:
        if "=" not in text:
            raise UsageError(f"{what} {text!r} must look like name=value")
        key, value = (part.strip() for part in text.split("=", 1))
        out[key] = value
    return out


def _literal(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def _judge_value(name: str, raw: Any) -> Any:
    fields = {f.name: f for f in dataclasses.fields(JudgeConfig)}
    if name not in fields:
        raise UsageError(f"unknown judge setting {name!r} (known: {', '.join(fields)})")
    value = _literal(raw)
    if name == "baselines" and isinstance(value, str):
        value = tuple(v.strip() for v in value.split(",") if v.strip())
    return value


def read_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None


def split_sets(sets: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """`--set` values into (search settings, judge settings, problem size overrides)."""
    search, judge, sizes = {}, {}, {}
    known = set(setting_names())
    for name, value in sets.items():
        if name in known:
            search[name] = value
        elif name.startswith("judge."):
            judge[name[len("judge."):]] = _judge_value(name[len("judge."):], value)
        else:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
            if close:
                raise UsageError(f"unknown setting {name!r}: did you mean {close[0]!r}? (names that are not "
                                 "search settings or judge.FIELD are problem size constants)")
            sizes[name] = _literal(value)  # checked against the problem's constants when loaded
    return search, judge, sizes


def build_options(*, problem: str | None, resume: str | None, llm: str | None, llm_roles: list[str],
                  backend: str | None, strategy: str | None, limits: dict[str, Any], sets: list[str],
                  run_dir: str | None, eval_mode: str | None, config_file: str | None, workspace: str,
                  skill_dirs: list[str], eval_workers: int | None, seed: int, rules: str | None = None,
                  target: str | None = None):
    from kernelwright.search.drivers.ray_eval import is_ray_mode, missing_ray_message
    from kernelwright.search.drivers.session import RunOptions

    config = read_config(config_file)
    section = dict(config.get("optimize") or {})
    search, judge_cfg, sizes = split_sets(_pairs(sets, "--set"))
    file_limits = {k: section.pop(k) for k in list(section) if k in LIMIT_NAMES}
    backend = backend or section.pop("backend", "triton")
    eval_mode = eval_mode or section.pop("eval", None)
    eval_workers = eval_workers or int(section.pop("eval_workers", 1))
    file_rules = section.pop("rules", None)
    rules = rules or file_rules  # --rules, else [optimize] rules, else [judge] rules
    file_target = section.pop("target", None)
    target = target or file_target
    if backend not in ("triton", "cuda"):
        raise UsageError(f"--backend must be triton or cuda, not {backend!r}")
    if eval_mode not in (None, "local", "batch") and not is_ray_mode(eval_mode):
        raise UsageError(f"--eval must be local, batch, ray or ray:ADDRESS, not {eval_mode!r}")
    if missing_ray_message(eval_mode):
        raise UsageError(missing_ray_message(eval_mode))
    try:
        settings = Settings.from_dict({**section, **search, **({"strategy": strategy} if strategy else {})})
        budget = Limits.from_dict({**file_limits, **{k: v for k, v in limits.items() if v is not None}})
        judge_values = {**(config.get("judge") or {}), **judge_cfg}
        if rules is not None:
            judge_values["rules"] = rules
        judge = JudgeConfig.from_dict({k: _judge_value(k, v) for k, v in judge_values.items()})
    except (SettingsError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    return RunOptions(problem=problem, resume=resume, llm=llm, llm_roles=_pairs(llm_roles, "--llm-role"),
                      config_file=config_file, backend=backend, settings=settings, limits=budget,
                      judge=judge, overrides=sizes, run_dir=run_dir, workspace=workspace,
                      eval_mode=eval_mode, eval_workers=eval_workers or 1, skill_dirs=skill_dirs, seed=seed,
                      target=target)


def suite_problems(target: Path) -> list[Path] | None:
    """The problems of a suite (a folder of problem files, or a list file), or None for one problem."""
    if target.is_dir():
        return sorted(p for p in target.glob("*.py") if not p.name.startswith("_"))
    if target.suffix in SUITE_LIST_SUFFIXES:
        base = target.parent
        lines = [ln.split("#", 1)[0].strip() for ln in target.read_text().splitlines()]
        return [(base / ln) if not Path(ln).is_absolute() else Path(ln) for ln in lines if ln]
    return None


def llm_configured(options) -> bool:
    if options.llm or options.llm_roles or os.environ.get("KERNELWRIGHT_LLM"):
        return True
    from kernelwright.llm.config import LLMConfig

    config = LLMConfig.load(options.config_file)
    return bool(config.default or config.roles)


def run_without_llm(options) -> int:
    """No model configured: the template autotuner is the fallback, when it is installed."""
    try:
        from kernelwright.search.drivers.autotune import run_autotune
        from kernelwright.tune.autopilot import optimize_without_llm  # noqa: F401 - is it installed?
    except ImportError:
        console.print("[red]no LLM configured and template autotuning is not available[/]: pass "
                      "--llm SPEC (e.g. openai:gpt-5, anthropic:claude-sonnet-4-5, exchange, "
                      "replay:CASSETTE.jsonl) or set KERNELWRIGHT_LLM", soft_wrap=True)
        return 1
    console.print("[yellow]no LLM configured: tuning the built-in kernel templates instead[/] "
                  "(pass --llm SPEC to let the agents write kernels)", soft_wrap=True)
    outcome = run_autotune(options)
    report_outcome(outcome)
    return outcome.exit_code


def _run_one(options, quiet: bool):
    from kernelwright.report.progress import progress_panel
    from kernelwright.search.drivers.session import run_optimization

    if quiet or not console.is_terminal:
        return run_optimization(options)
    with Live(progress_panel({}), console=console, refresh_per_second=4, transient=False) as live:
        return run_optimization(options, on_progress=lambda snap: live.update(progress_panel(snap)))


def report_outcome(outcome) -> None:
    from kernelwright.report.progress import progress_panel

    console.print(progress_panel(outcome.snapshot, title=f"run {outcome.run_id}"))
    style = {"done": "green", "paused": "yellow"}.get(outcome.status, "red")
    # soft_wrap: paths stay on one line, so they can be copied (and found by scripts)
    console.print(f"[{style}]{outcome.status}[/]: {escape(outcome.detail)}", soft_wrap=True)
    for path in outcome.pending_prompts[:20]:
        console.print(f"  prompt: {path}", soft_wrap=True, highlight=False)
    for path in outcome.pending_evals[:20]:
        console.print(f"  evaluation request: {path}", soft_wrap=True, highlight=False)
    if outcome.best_path is not None:
        speed = f" at {fmt_speedup(outcome.best_speedup)}" if outcome.best_speedup is not None else ""
        console.print(f"best: {outcome.best_id}{speed} -> {outcome.best_path}", soft_wrap=True, highlight=False)
    elif outcome.status == "done":
        console.print("no correct candidate was found")
    console.print(f"run folder: {outcome.run_dir}", soft_wrap=True, highlight=False)


def _suite_table(results: list[tuple[Path, Any]]) -> Table:
    table = Table(title="suite")
    for column in ("problem", "status", "best", "run folder"):
        table.add_column(column)
    for path, outcome in results:
        if isinstance(outcome, Exception):
            table.add_row(path.name, "[red]error[/]", escape(str(outcome)[:80]), "-")
            continue
        best = fmt_speedup(outcome.best_speedup) if outcome.best_speedup is not None else "-"
        table.add_row(path.name, outcome.status, best, str(outcome.run_dir))
    return table


def run_suite(problems: list[Path], options, quiet: bool) -> int:
    from kernelwright.problem import ProblemError
    from kernelwright.search.drivers.session import RunError

    results: list[tuple[Path, Any]] = []
    if options.run_dir:
        raise UsageError("--run-dir names one run; a suite puts its runs under --workspace")
    for path in problems:
        console.rule(str(path))
        try:
            outcome = _run_one(dataclasses.replace(options, problem=str(path)), quiet)
            report_outcome(outcome)
            results.append((path, outcome))
        except (RunError, ProblemError) as exc:
            console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
            results.append((path, exc))
    console.print(_suite_table(results))
    codes = [1 if isinstance(o, Exception) else o.exit_code for _, o in results]
    return 1 if 1 in codes else max(codes, default=0)


def optimize(
    problem: Optional[str] = typer.Argument(None, help="problem file, a folder of them, or a .txt list (a suite)"),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM spec for every agent, e.g. openai:gpt-5, "
                                      "exchange (prompts as files in RUN_DIR/exchange), replay:CASSETTE.jsonl"),
    llm_role: list[str] = typer.Option([], "--llm-role", help="ROLE=SPEC for one agent (planner, coder, "
                                       "repairer, analyst); repeatable"),
    backend: Optional[str] = typer.Option(None, "--backend", help="triton or cuda"),
    strategy: Optional[str] = typer.Option(None, "--strategy", help=f"one of {', '.join(STRATEGIES)}"),
    max_calls: Optional[int] = typer.Option(None, "--max-calls", help="LLM calls"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="LLM tokens (input + output)"),
    max_usd: Optional[float] = typer.Option(None, "--max-usd", help="LLM dollars"),
    max_evals: Optional[int] = typer.Option(None, "--max-evals", help="judge evaluations"),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="active wall time"),
    set_: list[str] = typer.Option([], "--set", help="name=value: a search setting, judge.FIELD, "
                                   "or a problem size constant; repeatable"),
    run_dir: Optional[str] = typer.Option(None, "--run-dir", help="folder of this run (default WORKSPACE/RUN_ID)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="continue the run in this folder"),
    eval_mode: Optional[str] = typer.Option(None, "--eval", help="local (judge here), batch (requests in "
                                            "RUN_DIR/evals), or ray / ray:ADDRESS (a Ray cluster)"),
    target: Optional[str] = typer.Option(None, "--target", help="the device candidates are judged on: a known GPU "
                                         "(h100, h200, a100, l4) or a device.json; default: this machine (local), "
                                         "the batch folder's device.json (batch)"),
    config: Optional[str] = typer.Option(None, "--config", help="TOML with [llm], [optimize], [judge] tables"),
    workspace: str = typer.Option("kw-runs", "--workspace", help="folder that holds run folders"),
    skills: list[str] = typer.Option([], "--skills", help="extra skill folder; repeatable"),
    eval_workers: Optional[int] = typer.Option(None, "--eval-workers", help="judge processes at once (local); "
                                              "judge actors (ray; default one per GPU)"),
    rules: Optional[str] = typer.Option(None, "--rules", help="rule set the judge applies: kernelbench (default), "
                                        "library or strict (see docs/judge.md)"),
    seed: int = typer.Option(0, "--seed", help="seed of the search's random choices"),
    quiet: bool = typer.Option(False, "--quiet", help="no live progress panel"),
) -> None:
    """Search for a faster, verified ModelNew with LLM agents; resumable at any point."""
    from kernelwright.problem import ProblemError
    from kernelwright.search.drivers.loop import ReplayDiverged
    from kernelwright.search.drivers.session import RunError

    if not problem and not resume:
        console.print("[red]name a problem file (or a suite), or --resume RUN_DIR[/]")
        raise typer.Exit(2)
    if resume and (problem or strategy or backend or set_ or skills or run_dir or rules):
        console.print("[yellow]a resumed run keeps the problem and settings it started with; only budgets, "
                      "--llm/--llm-role, --eval, --target and --config apply[/]")
    try:
        options = build_options(
            problem=problem, resume=resume, llm=llm, llm_roles=llm_role, backend=backend, strategy=strategy,
            limits={"max_calls": max_calls, "max_tokens": max_tokens, "max_usd": max_usd,
                    "max_evals": max_evals, "max_minutes": max_minutes},
            sets=set_, run_dir=run_dir, eval_mode=eval_mode, config_file=config, workspace=workspace,
            skill_dirs=skills, eval_workers=eval_workers, seed=seed, rules=rules, target=target)
        if not resume:
            suite = suite_problems(Path(problem))
            if suite is not None:
                raise typer.Exit(run_suite(suite, options, quiet))
            if not llm_configured(options):
                raise typer.Exit(run_without_llm(options))
        outcome = _run_one(options, quiet)
    except (UsageError, ConfigError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(2) from None
    except (RunError, ProblemError, ReplayDiverged) as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        raise typer.Exit(1) from None
    report_outcome(outcome)
    raise typer.Exit(outcome.exit_code)


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize)
