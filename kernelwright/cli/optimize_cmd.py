"""`kernelwright optimize PROBLEM_OR_SUITE`: search for a faster verified ModelNew.

Exit status (cli/exits.py): 0 done, 1 failed (also: this machine lacks a package or compiler the
judge needs), 2 bad usage or input, 75 paused (exchange prompts wait for answers, or batch
evaluations wait for verdicts; continue with `--resume RUN_DIR`), 130 interrupted (Ctrl-C or
SIGTERM; continue with `--resume RUN_DIR`). Progress goes to stderr, `--json` prints the result
to stdout.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import json
import sqlite3
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.live import Live

from kernelwright import configfile, envvars
from kernelwright.agents.templates import PromptTemplateError, prompt_search_path
from kernelwright.judge.config import JudgeConfig
from kernelwright.llm import providers
from kernelwright.llm.config import LLMConfig
from kernelwright.llm.errors import ConfigError
from kernelwright.problem import ProblemError, load_problem
from kernelwright.report.best import fmt_speedup
from kernelwright.report.progress import progress_line, progress_panel
from kernelwright.search.budget import LIMIT_NAMES, Limits
from kernelwright.search.drivers.loop import ReplayDiverged
from kernelwright.search.settings import STRATEGIES, Settings, SettingsError, names as setting_names
from kernelwright.store import RunStore, StoreError
from kernelwright.store.suite import SuiteError, entries_for, is_suite, read_manifest

from . import exits, heartbeat, no_llm, suite_view

console = Console(stderr=True)  # progress, panels, warnings
results = Console()  # the outcome lines (stdout), unless --json puts JSON there
SUITE_LIST_SUFFIXES = (".txt", ".list")


class UsageError(ValueError):
    """A flag or config value is wrong; shown to the user as is."""


class EnvironmentMissing(RuntimeError):
    """This machine lacks what the judge needs (a package, a compiler, a GPU): exit 1, not "done"."""


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


def read_config(path: str | None) -> tuple[str | None, dict[str, Any]]:
    """(the config file in use, its tables): --config, else $KW_CONFIG, else ./kernelwright.toml."""
    try:
        found, tables = configfile.load(path)
    except configfile.ConfigFileError as exc:
        raise UsageError(str(exc)) from None
    return (str(found.resolve()) if found else None), tables  # absolute: a resume may start elsewhere


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
    from kernelwright.search.drivers.ray_eval import is_ray_mode, missing_ray_message  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start
    from kernelwright.search.drivers.session import RunOptions  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start

    config_file, config = read_config(config_file)
    section = dict(config.get("optimize") or {})
    search, judge_cfg, sizes = split_sets(_pairs(sets, "--set"))
    file_limits = {k: section.pop(k) for k in list(section) if k in LIMIT_NAMES}
    file_backend, file_eval = section.pop("backend", "triton"), section.pop("eval", None)
    backend, eval_mode = backend or file_backend, eval_mode or file_eval
    eval_workers = eval_workers or int(section.pop("eval_workers", 1))
    file_rules = section.pop("rules", None)
    rules = rules or file_rules  # --rules, else [optimize] rules, else [judge] rules
    file_target = section.pop("target", None)
    prompt_dirs = _prompt_dirs(section.pop("prompts", []), config_file)
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
    if budget.max_evals is not None and budget.max_evals < 1:
        raise UsageError(f"--max-evals {budget.max_evals}: nothing would be judged; give 1 or more "
                         "(without it: 16 template instances without an LLM, no limit with one)")
    return RunOptions(problem=problem, resume=resume, llm=llm, llm_roles=_pairs(llm_roles, "--llm-role"),
                      config_file=config_file, backend=backend, settings=settings, limits=budget,
                      judge=judge, overrides=sizes, run_dir=run_dir, workspace=workspace,
                      eval_mode=eval_mode, eval_workers=eval_workers or 1, skill_dirs=skill_dirs, seed=seed,
                      target=target, prompt_dirs=prompt_dirs)


def _prompt_dirs(value: Any, config_file: str | None) -> list[str]:
    """`[optimize] prompts`: folders (relative to the config file) whose prompt files override the
    built-in ones by name; checked now, before any run folder exists."""
    folders = [value] if isinstance(value, str) else value
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        raise UsageError(f"[optimize] prompts must be a folder or a list of folders, not {value!r}")
    base = Path(config_file).parent if config_file else Path.cwd()
    folders = [str(base / Path(f).expanduser()) for f in folders]
    try:
        prompt_search_path(folders)
    except PromptTemplateError as exc:
        raise UsageError(f"[optimize] prompts: {exc}") from None
    return folders


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
    if options.llm or options.llm_roles or envvars.get("KW_LLM"):
        return True
    config = LLMConfig.load(options.config_file)
    return bool(config.default or config.roles)


def check_environment(backend: str, eval_mode: str | None, device: str) -> None:
    """Before any work: can this machine judge `backend` candidates? (not asked where candidates
    are judged elsewhere: --eval batch, --eval ray)"""
    if eval_mode == "batch" or (eval_mode or "").startswith("ray"):
        return
    missing = no_llm.missing_environment(backend, device)
    if missing:
        raise EnvironmentMissing("this machine cannot judge the candidates:\n" + "\n".join(f"  {m}" for m in missing))


# bytes one call moves at the sizes judged on a CPU above which the Triton interpreter takes minutes
# per candidate: the shipped examples move about 0.25 MB and are judged in 5-20 s on a 2-core CPU;
# the interpreter's time grows with the data, so 4 MB is about a minute idle and several loaded
INTERPRETER_BYTES = 4 * 2**20
EXAMPLE_BYTES = 2**18  # what the shipped examples move per call: a size that judges in seconds


def cpu_size_warning(problem_path: str, options) -> str | None:
    """Before a run judged here on a CPU: a warning when the problem, at the sizes judged on the CPU
    (shrunk from its GPU sizes), is large enough for the Triton interpreter to take minutes per
    candidate (and for a stage to run into the judge's timeout); None when it is small, judged
    elsewhere or on a GPU, or does not load (the run says why)."""
    if (options.eval_mode or "local") != "local" or str(options.judge.device).startswith("cuda"):
        return None
    import torch  # noqa: PLC0415 -- the CLI's start stays torch-free (torch takes 1-2 s): loaded when this command runs

    if options.judge.device == "auto" and torch.cuda.is_available():
        return None
    from kernelwright.problem.footprint import measure  # noqa: PLC0415 -- problem/footprint.py imports torch at its top (1-2 s): kept out of the CLI's start
    from kernelwright.problem.shrink import size_constants  # noqa: PLC0415 -- problem/footprint.py imports torch at its top (1-2 s): kept out of the CLI's start

    try:
        problem = load_problem(problem_path, overrides={**options.judge.overrides, **options.overrides},
                               shrink=options.judge.shrink is not False)
        moved = measure(problem).bytes
    except Exception:  # noqa: BLE001 -- a broken problem is the run's to report, with its own words
        return None
    if moved < INTERPRETER_BYTES:
        return None
    sizes = size_constants(problem)
    shown = ", ".join(f"{k}={v}" for k, v in sizes.items()) or "its own sizes"
    hint = ""
    if sizes:
        name = max(sizes, key=sizes.get)
        smaller = max(8, 1 << max(0, (sizes[name] * EXAMPLE_BYTES // moved).bit_length() - 1))  # a power of 2
        hint = f" For a quick run give smaller sizes, e.g. --set {name}={smaller}."
    shrunk = " (shrunk from its GPU sizes)" if problem.shrunk else ""
    return (f"{problem.name} is large for a CPU: at the sizes judged here{shrunk}, {shown}, one call moves "
            f"{moved / 2**20:.1f} MB, and the Triton interpreter may take several minutes per candidate; the judge "
            f"stops a stage after {options.judge.timeout_s:g} s and fails the candidate.{hint}")


def announce_without_llm() -> None:
    console.print("[yellow]no LLM configured: tuning the built-in kernel templates instead[/] "
                  "(pass --llm SPEC to let the agents write kernels)", soft_wrap=True)


class ProgressLines:
    """Live progress as lines on stderr, for a pipe or a log: one line when something changed, and
    a heartbeat line (what the run does, for how long) after a long silence (cli/heartbeat.py)."""

    def __init__(self, beat: heartbeat.Heartbeat | None = None):
        self.last = None
        self.beat = beat

    def __call__(self, snapshot: dict) -> None:
        if self.beat is not None:
            self.beat.doing(heartbeat.run_activity(snapshot))
            self.beat.seen(float((snapshot.get("spend") or {}).get("elapsed_s") or 0.0))
        spend = snapshot.get("spend") or {}
        state = (snapshot.get("candidates"), snapshot.get("best_id"), spend.get("evals"), spend.get("calls"))
        if state != self.last:
            self.last = state
            console.print(progress_line(snapshot), soft_wrap=True, highlight=False, markup=False)
            if self.beat is not None:
                self.beat.printed()


def _run_one(options, quiet: bool, no_model: bool = False):
    """One run, by the driver of its mode (search/drivers/modes.py: a resumed run's stored one)."""
    from kernelwright.search.drivers import modes  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start

    run = modes.runner(modes.run_mode(options, no_model))
    if quiet:
        return run(options)
    beat = heartbeat.Heartbeat(_say)
    beat.doing("preparing the run (loading the problem, recording its operations)")
    if not console.is_terminal:
        with beat:
            return run(options, on_progress=ProgressLines(beat))
    with Live(progress_panel({}), console=console, refresh_per_second=4, transient=False) as live, beat:
        def show(snapshot: dict) -> None:
            beat.doing(heartbeat.run_activity(snapshot))
            beat.seen(float((snapshot.get("spend") or {}).get("elapsed_s") or 0.0))
            live.update(progress_panel(snapshot))

        return run(options, on_progress=show)


def _say(text: str) -> None:
    console.print(text, soft_wrap=True, highlight=False, markup=False)


def report_outcome(outcome, to_stdout: bool = True, quiet: bool = False) -> None:
    """The final panel on stderr (not with --quiet); the outcome lines on stdout (stderr when
    --json owns stdout)."""
    if not quiet:
        console.print(progress_panel(outcome.snapshot, title=f"run {outcome.run_id}"))
    out = results if to_stdout else console
    style = {"done": "green", "paused": "yellow"}.get(outcome.status, "red")
    # soft_wrap: paths stay on one line, so they can be copied (and found by scripts)
    out.print(f"[{style}]{outcome.status}[/]: {escape(outcome.detail)}", soft_wrap=True)
    for path in outcome.pending_prompts[:20]:
        out.print(f"  prompt: {path}", soft_wrap=True, highlight=False)
    for path in outcome.pending_evals[:20]:
        out.print(f"  evaluation request: {path}", soft_wrap=True, highlight=False)
    if outcome.best_path is not None:
        speed = f" at {fmt_speedup(outcome.best_speedup)}" if outcome.best_speedup is not None else ""
        label = "best so far" if outcome.status != "done" else "best"
        out.print(f"{label}: {outcome.best_id}{speed} -> {outcome.best_path}", soft_wrap=True, highlight=False)
    elif outcome.status == "done":
        out.print("no correct candidate was found")
    out.print(f"run folder: {outcome.run_dir}", soft_wrap=True, highlight=False)


def run_suite(problems: list[Path], options, quiet: bool, no_model: bool = False,
              json_out: bool = False, label: str = "", resume: str | None = None) -> int:
    """Every problem in its own run, all going on at once in one suite folder (search/drivers/suite.py);
    `resume` continues a suite folder instead."""
    from kernelwright.search.drivers import suite as driver  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start

    names = [e.name for e in (read_manifest(resume).entries if resume else entries_for(problems))]
    if not names:
        raise UsageError("the suite holds no problem files")
    shown = contextlib.nullcontext() if quiet else suite_view.SuiteProgress(console, names, heartbeat.Heartbeat(_say))
    with shown as progress:
        on_progress = progress  # None with --quiet
        if resume:
            outcome = driver.resume_suite(resume, options, on_progress)
        else:
            outcome = driver.run_suite(problems, options, no_model, label, on_progress)
    out = console if json_out else results
    out.print(suite_view.summary_table(outcome))
    for line in suite_view.closing_lines(outcome):
        out.print(escape(line), soft_wrap=True, highlight=False)
    if json_out:
        typer.echo(json.dumps(suite_view.suite_json(outcome), indent=2))
    if outcome.exit_code == exits.EXIT_INTERRUPTED:
        exits.exit_now(outcome.exit_code)
    return outcome.exit_code


def suite_of(targets: list[str]) -> tuple[list[Path], str] | None:
    """(problems, label) when the targets make a suite (a folder, a list file, several of either or
    several problem files); None for one problem file."""
    problems: list[Path] = []
    for text in targets:
        found = suite_problems(Path(text))
        problems += found if found is not None else [Path(text)]
    if len(targets) == 1 and suite_problems(Path(targets[0])) is None:
        return None
    label = "+".join(Path(t).stem for t in targets)[:40]
    return problems, label


def optimize(
    problem: Optional[list[str]] = typer.Argument(None, help="problem file; or a suite: a folder of them, a .txt "  # noqa: B008
                                                "list, or several of these"),
    llm: Optional[str] = typer.Option(None, "--llm", help="LLM spec for every agent (PROVIDER:..., PROVIDER one of "
                                      f"{', '.join(providers.names())}; docs/providers.md), e.g. openai:gpt-5, "
                                      "exchange (prompts as files in RUN_DIR/exchange), replay:CASSETTE.jsonl; "
                                      "none given (no KW_LLM, no config default): the template autotuner runs"),
    llm_role: list[str] = typer.Option([], "--llm-role", help="ROLE=SPEC for one agent (planner, coder, "
                                       "repairer, analyst); repeatable"),
    backend: Optional[str] = typer.Option(None, "--backend", help="triton or cuda"),
    strategy: Optional[str] = typer.Option(None, "--strategy", help=f"one of {', '.join(STRATEGIES)}"),
    max_calls: Optional[int] = typer.Option(None, "--max-calls", help="LLM calls"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="LLM tokens (input + output)"),
    max_usd: Optional[float] = typer.Option(None, "--max-usd", help="LLM dollars"),
    max_evals: Optional[int] = typer.Option(None, "--max-evals", help="judge evaluations (without an LLM: "
                                            "template instances, default 16)"),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", help="active wall time"),
    set_: list[str] = typer.Option([], "--set", help="name=value: a search setting, judge.FIELD, "
                                   "or a problem size constant; repeatable"),
    run_dir: Optional[str] = typer.Option(None, "--run-dir", help="folder of this run, or of a suite "
                                          "(default WORKSPACE/RUN_ID)"),
    resume: Optional[str] = typer.Option(None, "--resume", help="continue the run (or every run of the suite) in "
                                         "this folder"),
    eval_mode: Optional[str] = typer.Option(None, "--eval", help="local (judge here), batch (requests in "
                                            "RUN_DIR/evals), or ray / ray:ADDRESS (a Ray cluster)"),
    target: Optional[str] = typer.Option(None, "--target", help="the device candidates are judged on: a known GPU "
                                         "(h100, h200, a100, l4) or a device.json; default: this machine (local), "
                                         "the batch folder's device.json (batch)"),
    config: Optional[str] = typer.Option(None, "--config", help="TOML file with \\[llm], \\[optimize] and "
                                         "\\[judge] tables (default: $KW_CONFIG, else ./kernelwright.toml)"),
    workspace: str = typer.Option("kw-runs", "--workspace", help="folder that holds run folders (git-ignored)"),
    skills: list[str] = typer.Option([], "--skills", help="extra skill folder; repeatable"),
    eval_workers: Optional[int] = typer.Option(None, "--eval-workers", help="judge processes at once (local); "
                                              "judge actors (ray; default one per GPU)"),
    rules: Optional[str] = typer.Option(None, "--rules", help="rule set the judge applies: kernelbench (default), "
                                        "library or strict (see docs/judge.md)"),
    seed: int = typer.Option(0, "--seed", help="seed of the search's random choices"),
    quiet: bool = typer.Option(False, "--quiet", help="nothing on stderr but errors and warnings: no live progress, "
                               "no final panel; the outcome lines (or --json) still go to stdout"),
    json_out: bool = typer.Option(False, "--json", help="print the result as JSON on stdout"),
) -> None:
    """Search for a faster, verified ModelNew with LLM agents (no LLM: tune built-in Triton templates).

    Ctrl-C, SIGTERM or kill -9 lose nothing: continue with --resume RUN_DIR.
    """
    if not problem and not resume:
        console.print("[red]name a problem file (or a suite), or --resume RUN_DIR[/]")
        raise typer.Exit(exits.EXIT_USAGE)
    limits = {"max_calls": max_calls, "max_tokens": max_tokens, "max_usd": max_usd, "max_evals": max_evals,
              "max_minutes": max_minutes}
    with exits.sigterm_interrupts():
        try:
            code = _optimize(problem or [], resume, dict(
                problem=(problem or [None])[0], resume=resume, llm=llm, llm_roles=llm_role, backend=backend, strategy=strategy,
                limits=limits, sets=set_, run_dir=run_dir, eval_mode=eval_mode, config_file=config,
                workspace=workspace, skill_dirs=skills, eval_workers=eval_workers, seed=seed, rules=rules,
                target=target), quiet, json_out)
        except KeyboardInterrupt:
            console.print("[yellow]interrupted before the run started[/]: nothing was stored")
            code = exits.EXIT_INTERRUPTED
    raise typer.Exit(code)


def _optimize(targets: list[str], resume: str | None, flags: dict[str, Any], quiet: bool, json_out: bool) -> int:
    """The command's work; returns the exit code (errors are printed here)."""
    from kernelwright.search.drivers import modes  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start
    from kernelwright.search.drivers.session import RunError  # noqa: PLC0415 -- search/drivers/ load the judge's pool (api.py, the sandbox, the supervisor: 0.1-0.3 s) at import: kept out of the CLI's start

    try:
        options = build_options(**flags)
        if resume:
            _check_resumed_problem(targets, resume)
        if resume and is_suite(resume):
            _warn_fixed_on_resume(flags)
            check_environment(options.backend, flags["eval_mode"] or _suite_eval(resume), options.judge.device)
            return run_suite([], options, quiet, json_out=json_out, resume=resume)
        if resume:
            _warn_fixed_on_resume(flags)
            no_model = modes.run_mode(options) == modes.AUTOTUNE
            if no_model and (flags["llm"] or flags["llm_roles"]):
                raise UsageError(f"{resume} was made without an LLM and resumes as it started; "
                                 "start a new run to use --llm")
            _check_resumed_environment(resume, flags["eval_mode"])
            outcome = _run_one(options, quiet)
        else:
            for text in targets:
                if not Path(text).exists():
                    raise UsageError(f"{text}: file not found")
            suite = suite_of(targets)
            no_model = not llm_configured(options)
            if no_model:
                search_sets = split_sets(_pairs(flags["sets"], "--set"))[0]
                reasons = no_llm.refused_flags(backend=flags["backend"], strategy=flags["strategy"],
                                               limits=flags["limits"], search_sets=search_sets,
                                               eval_mode=flags["eval_mode"], skills=flags["skill_dirs"])
                if reasons:
                    raise UsageError(no_llm.refusal_message(reasons))
            check_environment(options.backend, options.eval_mode, options.judge.device)
            if no_model and not quiet:
                announce_without_llm()
            warning = cpu_size_warning(targets[0], options) if suite is None else None
            if warning:
                console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
            if suite is not None:
                return run_suite(suite[0], options, quiet, no_model, json_out, label=suite[1])
            outcome = _run_one(options, quiet, no_model)
    except (UsageError, ConfigError, ProblemError, RunError, SuiteError) as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        return exits.EXIT_USAGE
    except (ReplayDiverged, EnvironmentMissing) as exc:
        console.print(f"[red]{escape(str(exc))}[/]", soft_wrap=True)
        return exits.EXIT_FAILED
    report_outcome(outcome, to_stdout=not json_out, quiet=quiet)
    if json_out:
        typer.echo(json.dumps(outcome.to_dict(), indent=2))
    if outcome.status == "interrupted":
        exits.exit_now(outcome.exit_code)
    return outcome.exit_code


def _suite_eval(suite_dir: str) -> str:
    return read_manifest(suite_dir).eval


def _check_resumed_problem(targets: list[str], resume: str) -> None:
    """A problem named beside --resume must be the run's own (a resume never changes it): another
    file, or any with a suite, is a usage error instead of being ignored."""
    if not targets:
        return
    stored = None if is_suite(resume) or len(targets) > 1 else _stored_problem(resume)
    if stored is not None and Path(targets[0]).resolve() == Path(stored).resolve():
        return
    own = f" ({stored})" if stored else ""
    raise UsageError(f"--resume {resume} continues the problem(s) it started with{own}, not "
                     f"{' '.join(targets)}: drop the problem argument to resume, or start a new run without --resume")


def _stored_problem(run_dir: str) -> str | None:
    """The problem file a stored run was made for; None when the folder holds no readable run."""
    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            return store.run()["problem_path"]
    except (StoreError, OSError, sqlite3.Error, KeyError):
        return None


def _warn_fixed_on_resume(flags: dict[str, Any]) -> None:
    if flags["strategy"] or flags["backend"] or flags["sets"] or flags["skill_dirs"] \
            or flags["run_dir"] or flags["rules"]:
        console.print("[yellow]a resumed run keeps the problem and settings it started with; only budgets, "
                      "--llm/--llm-role, --eval, --target and --config apply[/]")


def _check_resumed_environment(run_dir: str, eval_mode: str | None) -> None:
    """The stored backend must be judgeable here too (unless this session judges elsewhere)."""
    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            settings = store.run().get("settings") or {}
    except StoreError:
        return  # the session says what is wrong with the folder
    backend = (settings.get("problem") or {}).get("backend", "triton")
    mode = eval_mode or settings.get("eval", "local")
    check_environment(backend, mode, (settings.get("judge") or {}).get("device", "auto"))


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize)
