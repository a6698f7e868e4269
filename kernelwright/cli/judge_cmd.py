"""`kernelwright judge` and `kernelwright baseline`: the judge from the command line.

Exit codes of `judge`: 0 the candidate passed, 1 it failed (or could not be built), 2 a usage
error or a problem file that cannot be loaded.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernelwright import configfile
from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.baseline_lane import DEFAULT_LANES
from kernelwright.judge.verdict import Verdict
from kernelwright.problem import ProblemError, load_problem, parse_override
from kernelwright.problem.reference import reference_kind
from kernelwright.rules import UnknownRuleSet, get

from . import exits, heartbeat

console = Console()  # verdicts and tables (stdout)
errors = Console(stderr=True)  # what went wrong before any verdict


def register(app: typer.Typer) -> None:
    app.command("judge")(judge_command)
    app.command("baseline")(baseline_command)


def parse_overrides(settings: list[str]) -> dict:
    overrides = {}
    for text in settings:
        try:
            name, value = parse_override(text)
        except ProblemError as exc:
            raise typer.BadParameter(str(exc), param_hint="--set") from None
        overrides[name] = value
    return overrides


def file_config(config_file: Optional[str]):
    """JudgeConfig from the [judge] table of the config file (--config, $KW_CONFIG or
    ./kernelwright.toml), as `optimize` reads it; exit 2 when the file is wrong."""
    try:
        _, tables = configfile.load(config_file)
        values = dict(tables.get("judge") or {})
        if "baselines" in values and isinstance(values["baselines"], str):
            values["baselines"] = [v.strip() for v in values["baselines"].split(",") if v.strip()]
        return JudgeConfig.from_dict(values)
    except (configfile.ConfigFileError, ValueError, TypeError) as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(exits.EXIT_USAGE) from None


def build_config(settings: list[str], trials: Optional[int], timeout: Optional[float], no_time: bool,
                 rules: Optional[str], device: str, config_file: Optional[str] = None):
    config = file_config(config_file)
    try:
        config.rules = get(rules or config.rules).name  # --rules, else the file's [judge] rules
    except UnknownRuleSet as exc:
        raise typer.BadParameter(str(exc), param_hint="--rules") from None
    config.overrides = {**config.overrides, **parse_overrides(settings)}
    if device != "auto" or config.device == "auto":
        config.device = device
    if trials is not None:
        config.trials = trials
    if timeout is not None:
        config.timeout_s = timeout
    if no_time:
        config.time = False
    return config


RULES_HELP = "rule set: kernelbench (default; torch may keep part of the work), library (no torch compute in " \
             "forward's Python; C++ may call cuBLAS/cuDNN/ATen) or strict (every compute op in your own kernels)"


def judge_command(
    problem: Optional[Path] = typer.Argument(None, help="KernelBench-format problem file"),
    candidate: Optional[Path] = typer.Argument(None, help="candidate file defining ModelNew"),
    json_out: bool = typer.Option(False, "--json", help="print the verdict as JSON"),
    settings: list[str] = typer.Option([], "--set", help="size override name=value (repeatable)"),
    trials: Optional[int] = typer.Option(None, "--trials", min=1, help="correctness trials"),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="seconds allowed per check/time stage"),
    no_time: bool = typer.Option(False, "--no-time", help="check correctness only"),
    rules: Optional[str] = typer.Option(None, "--rules", help=RULES_HELP),
    batch: Optional[list[Path]] = typer.Option(None, "--batch", help="judge every pending request in this folder "
                                               "(repeatable: several folders, e.g. several suites', judged as one "
                                               "queue by one runner)"),
    device: str = typer.Option("auto", "--device", help="auto, cuda or cpu"),
    profile_budget: float = typer.Option(300.0, "--profile-budget", help="with --batch: seconds for profiling "
                                         "passing candidates whose requests ask for it (0: none)"),
    config_file: Optional[str] = typer.Option(None, "--config", help="config file whose \\[judge] table is read "
                                              "(default: $KW_CONFIG, else ./kernelwright.toml)"),
    retry_errors: bool = typer.Option(False, "--retry-errors", help="with --batch: judge again the requests whose "
                                      "verdict is a system error (internal judge error, out of GPU memory on a shared "
                                      "GPU, ...); every other verdict is kept"),
    baseline_lanes: int = typer.Option(DEFAULT_LANES, "--baseline-lanes", min=0, help="with --batch: problems whose eager and "
                                       "torch.compile baselines are measured ahead at once, first-judged first (0: off)"),
    no_daemon: bool = typer.Option(False, "--no-daemon", help="judge in this process, not through the judge daemon "
                                   "(also $KW_JUDGE_DAEMON=0)"),
    daemon_idle: Optional[float] = typer.Option(None, "--daemon-idle", min=0, help="seconds a judge daemon this call "
                                                "starts waits for its next request before it ends (default "
                                                "$KW_JUDGE_DAEMON_IDLE, else 300); with --serve: none unless given"),
    serve: bool = typer.Option(False, "--serve", help="run the judge daemon of this user and environment in the "
                               "foreground (calls start one on demand otherwise)"),
) -> None:
    """Judge one candidate against a problem in a sandboxed process, or a whole batch folder.

    One candidate is judged by the user's judge daemon, started by the first call and kept for
    --daemon-idle seconds, so later calls fork from its warm processes (torch imported once);
    every candidate still runs in a fresh sandboxed process (docs/judge.md, "The judge daemon").
    """
    config = build_config(settings, trials, timeout, no_time, rules, device, config_file)
    if serve:
        from kernelwright.cli.judge_daemon import serve as serve_daemon  # noqa: PLC0415 -- the judge daemon's modules pull the fork server and the sandbox (25 ms): kept out of the CLI's start

        raise typer.Exit(serve_daemon(config, daemon_idle))
    if batch:
        raise typer.Exit(run_batch_folders(batch, config, profile_budget, retry_errors, baseline_lanes))
    if retry_errors:
        raise typer.BadParameter("--retry-errors re-judges a batch folder: give --batch DIR")
    if problem is None or candidate is None:
        raise typer.BadParameter("give PROBLEM and CANDIDATE files, or --batch DIR")
    for path in (problem, candidate):
        if not path.is_file():
            refuse(problem, candidate, f"{path}: {'not a file' if path.exists() else 'file not found'}", json_out)
    from kernelwright.cli import judge_daemon  # noqa: PLC0415 -- the judge daemon's modules pull the fork server and the sandbox (25 ms): kept out of the CLI's start
    from kernelwright.judge.scheduling.daemon_key import enabled, idle_seconds  # noqa: PLC0415 -- the judge daemon's modules pull the fork server and the sandbox (25 ms): kept out of the CLI's start

    with heartbeat.Heartbeat(_say) as beat:  # a hang is stopped by the judge's timeouts; until then, say so
        beat.doing(f"judging {candidate.name} against {problem.name} (the judge allows each stage "
                   f"{config.timeout_s:g} s)")
        verdict = judge_daemon.judge(problem, candidate, config, enabled() and not no_daemon,
                                     idle_seconds(daemon_idle), say=_say)
    if json_out:
        typer.echo(verdict.to_json())
    else:
        console.print(verdict_table(verdict))
    raise typer.Exit(exit_code(verdict))


def _say(text: str) -> None:
    typer.echo(text, err=True)


def refuse(problem: Path, candidate: Path, message: str, json_out: bool) -> None:
    """Bad input (exit 2): the message on stderr, and with --json a verdict saying it on stdout
    (status error, stage load: what `judge --json` prints for a problem that does not load)."""
    errors.print(f"[red]{escape(message)}[/]", soft_wrap=True)
    if json_out:
        typer.echo(Verdict(problem=str(problem), candidate=str(candidate), status="error", stage="load",
                           error=message).to_json())
    raise typer.Exit(exits.EXIT_USAGE)


def exit_code(verdict) -> int:
    if verdict.passed:
        return exits.EXIT_OK
    if verdict.status == "error" and verdict.stage == "load":
        return exits.EXIT_USAGE  # the problem itself could not be loaded or run
    return exits.EXIT_FAILED


def run_batch_folders(folders: list[Path], config, profile_budget: float = 300.0, retry_errors: bool = False,
                      baseline_lanes: int = DEFAULT_LANES, pool=None) -> int:
    """Judge every pending request of `folders` as one queue (one runner, one pool: the requests by
    priority, the baseline lane over all their problems, then one profile pass round-robin over the
    folders), as `python -m kernelwright.judge.scheduling.batch DIR...` does. `pool`: a JudgePool
    (default: a new one from `config`)."""
    from kernelwright.judge.scheduling.batch import judge_folders, pending, system_errors  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of the CLI's start

    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        console.print(f"[red]{', '.join(missing)}: not a folder[/]")
        return exits.EXIT_USAGE
    for folder in folders:
        waiting, retried = len(pending(folder)), len(system_errors(folder)) if retry_errors else 0
        console.print(f"{waiting} pending requests in {folder}"
                      + (f", {retried} whose verdict is a system error judged again" if retry_errors else ""))
    if pool is None:
        from kernelwright.judge.scheduling.pool import JudgePool  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of the CLI's start

        pool = JudgePool(config)
    judged = judge_folders(list(folders), pool, config, profile_budget, log=console.print,
                           retry_errors=retry_errors, baseline_lanes=baseline_lanes)
    console.print(f"{len(judged)} verdicts written")
    return exits.EXIT_OK


def _ms(stats) -> str:
    return f"{stats.median_ms:.4g} ms ± {stats.iqr_ms:.2g} (n={stats.n}, {stats.method})" if stats else "-"


def verdict_table(verdict) -> Table:
    """Status, stage, failing trials, flags, timing, speedups and floor of one verdict."""
    colour = {"pass": "green", "fail": "red"}.get(verdict.status, "yellow")
    table = Table(title=f"candidate {Path(verdict.candidate).name} on problem {Path(verdict.problem).name}",
                  show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("status", f"[{colour}]{verdict.status}[/] (stage {verdict.stage}, device {verdict.device})")
    if verdict.rules:
        table.add_row("rules", verdict.rules)
    if verdict.error:
        table.add_row("error", verdict.error)
    failed = [t for t in verdict.trials if not t.ok]
    if verdict.trials:
        table.add_row("trials", f"{len(verdict.trials) - len(failed)}/{len(verdict.trials)} passed"
                      + "".join(f"\n#{t.trial} {t.variant}: {t.message}" for t in failed[:3]))
    elif not verdict.passed:
        table.add_row("trials", f"none run (the judge stopped at stage {verdict.stage}, before or during the "
                                "correctness trials)")
    margin = (verdict.precision or {}).get("margin") or {}
    if margin.get("worst") is not None:
        table.add_row("error margin", margin_text(margin))
    if verdict.work is not None:
        table.add_row("torch work", work_text(verdict.work))
    for flag in verdict.flags:
        table.add_row(f"flag {flag.code}", f"{flag.severity}: {flag.message}")
    if verdict.timing:
        table.add_row("timing", _ms(verdict.timing) + (f"\n{verdict.timing.note}" if verdict.timing.note else ""))
    if verdict.baselines:
        for name in ("eager", "compile_default", "compile_max_autotune"):
            stats = getattr(verdict.baselines, name)
            if stats:
                speed = verdict.speedup.get(name)
                what = f" ({verdict.baselines.eager_label})" if name == "eager" else ""
                table.add_row(f"baseline {name}", _ms(stats) + what + (f"  → speedup {speed:.3g}x" if speed else "")
                              + _measured(verdict.baselines.measured.get(name)))
    if verdict.floor:
        pct = f", {verdict.floor.pct_of_floor:.1f}% of speed of light" if verdict.floor.pct_of_floor else ""
        table.add_row("floor", f"{verdict.floor.floor_ms:.4g} ms ({verdict.floor.bound}-bound){pct}")
    if verdict.overrides:
        table.add_row("sizes", ", ".join(f"{k}={v}" for k, v in verdict.overrides.items())
                      + (" (shrunk for CPU)" if verdict.shrunk else ""))
    if verdict.process:
        table.add_row("sandbox", f"{verdict.process.wall_s:.1f} s; network "
                      + ("isolated" if verdict.process.network_isolated else "NOT isolated"))
    return table


def margin_text(margin: dict) -> str:
    """'0.031 of the elementwise tolerance, 0.002 of the rel-L2 bound (worst over trials)'."""
    parts = [f"{margin[key]:.3g} of the {label}" for key, label in
             (("elementwise", "elementwise tolerance"), ("rel_l2", "rel-L2 bound")) if margin.get(key) is not None]
    return ", ".join(parts) + " (measured / allowed, worst over trials)"


def work_text(work) -> str:
    def show(counts: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"

    launches = work.launches or {}
    own = sum(sum(v.values()) for v in launches.values())
    return (f"reference {show(work.reference)}; candidate's torch {show(work.torch)}"
            f" (extension {show(work.extension)}); own launches {own}"
            + (f"; vendor: {'; '.join(work.vendor)}" if work.vendor else ""))


def baseline_command(
    target: Path = typer.Argument(..., help="a problem file, or a folder of problems (searched recursively)"),
    settings: list[str] = typer.Option([], "--set", help="size override name=value (repeatable)"),
    device: str = typer.Option("auto", "--device", help="auto, cuda or cpu"),
    json_out: bool = typer.Option(False, "--json", help="print the baselines as JSON"),
    force: bool = typer.Option(False, "--force", help="measure again, replacing cached baselines"),
    config_file: Optional[str] = typer.Option(None, "--config", help="config file whose \\[judge] table is read "
                                              "(default: $KW_CONFIG, else ./kernelwright.toml)"),
) -> None:
    """Time the reference of each problem under eager and torch.compile (cached on disk).

    A noisy measurement is repeated before it is cached (docs/judge.md); --force measures again.
    Exit 0 when every baseline asked for was measured (or does not apply: torch.compile on a CPU,
    or of a reference that is a kernel), 1 when one failed or a problem did not load (each one is
    a row of the table with its error), 2 when TARGET does not exist.
    """
    from kernelwright.judge import baseline  # noqa: PLC0415 -- it loads profile/ (23 modules, 60 ms): kept out of the CLI's start

    if not target.exists():
        errors.print(f"[red]{escape(str(target))}: not found[/]", soft_wrap=True)
        raise typer.Exit(exits.EXIT_USAGE)
    problems = [target] if target.is_file() else sorted(p for p in target.rglob("*.py") if p.name != "__init__.py")
    config = file_config(config_file)
    config.overrides = {**config.overrides, **parse_overrides(settings)}
    device = resolve_device(device)
    if device == "cpu" and "TRITON_INTERPRET" not in os.environ:
        os.environ["TRITON_INTERPRET"] = "1"  # a reference written in Triton runs on CPU tensors only interpreted
    results, failed = {}, []
    with heartbeat.Heartbeat(_say) as beat:
        for index, path in enumerate(problems, 1):
            beat.doing(f"measuring the baselines of {path.name} ({index} of {len(problems)})")
            try:
                overrides = effective_overrides(path, config.overrides, device)
            except Exception as exc:  # noqa: BLE001 - a broken problem file is a row of its own; the rest still run
                results[str(path)] = baseline.Baselines(errors={"load": f"the problem did not load: {exc}"})
                failed.append(path)
                continue
            results[str(path)] = found = baseline.get_baselines(path, overrides, config, device, force=force)
            if failed_kinds(path, found, config, device):
                failed.append(path)
    if json_out:
        typer.echo(json.dumps({k: asdict(v) for k, v in results.items()}, indent=2))
    else:
        console.print(baselines_table(results, device, config))
        for line in skipped_notes(results, config, device):
            console.print(escape(line), soft_wrap=True, highlight=False)
        if failed:
            console.print(f"{len(failed)} of {len(problems)} problem(s) without every baseline asked for "
                          "(see errors)", soft_wrap=True, highlight=False)
    raise typer.Exit(exits.EXIT_FAILED if failed else exits.EXIT_OK)


def failed_kinds(path, result, config, device: str) -> list[str]:
    """The baseline kinds that were to be measured for the problem at `path` and were not
    (failures; "load" when the problem did not load), as the judge decides which apply."""
    from kernelwright.judge.baseline import wanted_kinds  # noqa: PLC0415 -- it loads profile/ (23 modules, 60 ms): kept out of the CLI's start

    if "load" in result.errors:
        return ["load"]
    kinds, _ = wanted_kinds(config, device, False, reference_kind(Path(path).read_text(errors="replace")))
    return [k for k in kinds if getattr(result, k, None) is None]


def effective_overrides(path: Path, overrides: dict, device: str) -> dict:
    """On the CPU, KernelBench's GPU sizes are shrunk first (as the judge does), so the baseline
    times the sizes a CPU verdict would compare against."""
    if device.startswith("cuda"):
        return dict(overrides)
    return dict(load_problem(path, overrides, shrink=True).overrides)


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch  # noqa: PLC0415 -- the CLI's start stays torch-free (torch takes 1-2 s): loaded when this command runs

    return "cuda" if torch.cuda.is_available() else "cpu"


def baselines_table(results: dict, device: str, config) -> Table:
    """One row per problem: each kind's time, "failed" or "n/a" (skipped: said below the table),
    and each failure's error in full (its first line)."""
    table = Table(title=f"baselines on {device}")
    for column in ("problem", "eager", "compile_default", "compile_max_autotune", "cached", "errors"):
        table.add_column(column, overflow="fold")
    for path, result in results.items():
        failed = set(failed_kinds(path, result, config, device))
        cells = [_baseline_cell(result, kind, kind in failed) for kind in ("eager", "compile_default",
                                                                           "compile_max_autotune")]
        shown = [(k, v) for k, v in result.errors.items() if k in failed or k == "load"]
        text = "\n".join(f"{k}: {_first_line(v)}" for k, v in shown)
        label = "" if result.eager_label == "eager PyTorch" else f" (eager: {result.eager_label})"
        table.add_row(escape(Path(path).name + label), *cells, "yes" if result.cached else "no", escape(text))
    return table


def skipped_notes(results: dict, config, device: str) -> list[str]:
    """Why kinds were not measured where they do not apply, once per reason."""
    notes: dict[str, list[str]] = {}
    for path, result in results.items():
        failed = set(failed_kinds(path, result, config, device))
        for kind, why in result.errors.items():
            if kind not in failed and kind != "load":
                notes.setdefault(f"{kind}: {_first_line(why)}", []).append(Path(path).name)
    return [f"n/a {what} ({', '.join(names)})" for what, names in notes.items()]


def _first_line(text: str) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""


def _measured(info: dict | None) -> str:
    """Which cached measurement a speedup used: when, how many repeats, steady or noisy."""
    if not info:
        return ""
    state = "steady" if info.get("steady", True) else "NOISY"
    return (f"\nmeasured {info.get('measured_at')}, {len(info.get('repeats', []))} repeats, {state}, "
            f"cache {info.get('cache_file')}")


def _baseline_cell(result, kind: str, failed: bool = False) -> str:
    stats = getattr(result, kind)
    if stats is None:
        return "[red]failed[/]" if failed else ("n/a" if kind in result.errors else "-")
    info = result.measured.get(kind) or {}
    noisy = "" if info.get("steady", True) else " [red]NOISY[/]"
    return f"{stats.median_ms:.4g} ms ± {stats.iqr_ms:.2g} ({len(info.get('repeats', []))} repeats){noisy}"
