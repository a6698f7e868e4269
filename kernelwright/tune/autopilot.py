"""Optimise a problem with no LLM: match the built-in template library, tune, verify, report.

This is what `kernelwright optimize` does when no --llm is given. The template's default instance
is judged first (the judge verifies the generated kernel before any tuning), then the search runs
within the budget; every judged instance goes to `on_result` before the next one starts, so the
caller can persist it. On a machine without a GPU the Triton kernels run in the interpreter and
times are CPU wall time, which the verdicts say.

Measurements go to the tuning cache (tune.cache; by default the user's, see `open_cache`) as each
verdict arrives, so running the same problem again, or resuming an interrupted run, judges only
what was never measured: cached steps still reach `on_result`, with `step.cached` set. The
result's `cost` says what the step spent (evaluations, device seconds, wall seconds).
"""
from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from rich.markup import escape

from kernelwright.judge import JudgeConfig
from kernelwright.judge.verdict import Verdict
from kernelwright.problem import ProblemError, load_problem
from kernelwright.problem.loader import read_source
from kernelwright.problem.ops import forward_op_kinds
from kernelwright.problem.reference import reference_kind

from .budget import sweep_budget
from .cache import TuneCache
from .cost import TuneCost
from .evaluate import JudgeEvaluator, Measurement
from .from_reference import templatize_reference
from .hardware import DeviceLimits, detect_limits
from .library import NoTemplate, build_template
from .seeds import SeedCache
from .sweep_eval import SweepEvaluator
from .template import Template
from .tuner import Trial, TuneResult, tune_groupwise


# matching traces the problem with torch.export, which is not thread-safe: a suite tunes its problems
# in threads, and two exports at once can fall back to static shapes (another template, other requests)
_MATCHING = threading.Lock()


@dataclass
class AutopilotStep:
    """One judged instance, handed to `on_result` as soon as its verdict is in."""

    index: int
    params: dict[str, Any]
    source: str
    measurement: Measurement
    template_name: str

    @property
    def verdict(self):
        data = self.measurement.verdict
        return Verdict.from_dict(data) if data else None

    @property
    def cached(self) -> bool:
        """Answered by the tuning cache: measured by an earlier (or interrupted) run, not now."""
        return self.measurement.cached


@dataclass
class AutopilotResult:
    problem: str
    matched: bool
    message: str
    template_name: str | None = None
    template: Template | None = None
    best_source: str | None = None
    best_params: dict[str, Any] | None = None
    best_verdict: Any = None  # Verdict
    default_verdict: Any = None  # Verdict of the default instance
    tried: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (params, verdict summary)
    tune: TuneResult | None = None
    kernels: list[str] = field(default_factory=list)  # one line per generated kernel
    template_path: str | None = None

    @property
    def cost(self) -> TuneCost:
        """What the tuning spent: evaluations (measured, cached), device and wall seconds."""
        return self.tune.cost if self.tune is not None else TuneCost()

    @property
    def exit_code(self) -> int:
        """0 when a passing instance was found, 1 otherwise (for the command line)."""
        return 0 if self.best_source else 1

    def summary(self) -> str:
        """A few lines for a person: what matched, what was judged, the best instance."""
        lines = [f"{self.problem}: {self.message}"]
        lines += [f"  {k}" for k in self.kernels]
        if self.best_params is not None:
            lines.append(f"  best parameters: {self.best_params}")
            default = self.default_verdict
            if default is not None and default.timing and self.best_verdict and self.best_verdict.timing:
                ratio = default.timing.median_ms / self.best_verdict.timing.median_ms
                lines.append(f"  tuned vs default instance: {ratio:.2f}x")
        if self.tune is not None:
            lines.append(f"  cost: {self.cost.summary()}")
        if self.template_path:
            lines.append(f"  template: {self.template_path}")
        return "\n".join(lines)

    def __rich__(self) -> str:
        return escape(self.summary())

    @property
    def improved(self) -> bool:
        """Whether tuning found an instance faster than the default one."""
        best, default = self.best_verdict, self.default_verdict
        if not (best and default and best.timing and default.timing and default.passed):
            return False
        return best.timing.median_ms < default.timing.median_ms


def optimize_without_llm(
    problem_path: str | Path,
    *,
    overrides: dict[str, Any] | None = None,
    strategy: str = "auto",
    budget_evals: int | None = None,
    judge_config=None,
    on_result: Callable[[AutopilotStep], None] | None = None,
    workers: int = 1,
    cache: TuneCache | str | None = "default",
    seed: int = 0,
    limits: DeviceLimits | None = None,
    workdir: str | Path | None = None,
    stop: Callable[[], bool] | None = None,
    make_evaluator: Callable[..., Any] | None = None,
    batch: int | None = None,
    sweep: int = 0,
    seeds: SeedCache | str | None = "default",
) -> AutopilotResult:
    """Match, tune and verify `problem_path` with the built-in templates; never raises for a
    problem the library cannot handle (the result says why). `stop()` is asked before each
    instance is judged (a time limit). `cache`: a TuneCache, "default" (the user's cache,
    KW_TUNE_CACHE), or None to measure everything afresh. `make_evaluator` takes JudgeEvaluator's
    arguments and returns the evaluator to use (default JudgeEvaluator: judged here); `batch`
    configurations are proposed at once (default `workers`). `sweep` > 1: configurations are
    benchmarked `sweep` at a time inside one judge evaluation and each batch's fastest judged in
    full (tune/sweep_eval.py); `budget_evals` then counts judge evaluations (a batch costs two),
    not configurations. `seeds` (tune/seeds.py): where the search starts, after the defaults (the
    fastest configurations measured before for this template family, device and nearest shape);
    "default" is the user's seed files when `cache` is "default" too, else none (a caller with a
    cache of its own, a run's store, replays its run and must ask what it asked before)."""
    config = JudgeConfig.from_dict((judge_config or JudgeConfig()).to_dict())
    config.overrides = {**config.overrides, **(overrides or {})}
    shrink = config.shrink if config.shrink is not None else not has_gpu()
    name = Path(problem_path).stem
    limits = limits or detect_limits()
    with _MATCHING:
        match = _reference_match(problem_path, name)  # a reference that is a kernel: tune its own launches
        if isinstance(match, str):
            return AutopilotResult(name, False, match)
        if match is None:
            try:
                problem = load_problem(problem_path, overrides=config.overrides, shrink=shrink)
            except ProblemError as exc:
                return AutopilotResult(name, False, f"cannot load the problem: {exc}")
            try:
                match = build_template(problem, allow_tf32=config.allow_tf32, limits=limits, seed=seed)
            except NoTemplate as exc:
                return AutopilotResult(name, False, _no_template_message(problem, exc))
    template = match.template
    folder = Path(workdir or tempfile.mkdtemp(prefix="kw-autopilot-"))
    folder.mkdir(parents=True, exist_ok=True)
    template_path = folder / f"{name}.template.py"
    template_path.write_text(template.source)
    sweeping = sweep > 1
    if make_evaluator is None and sweeping:
        make_evaluator = SweepEvaluator
    evaluator = (make_evaluator or JudgeEvaluator)(problem_path, config, workers=workers,
                                                   workdir=folder / "instances", cache=open_cache(cache),
                                                   limits=limits)

    def handle(trial: Trial) -> None:
        if on_result is not None:
            step = AutopilotStep(trial.index, trial.params, template.instantiate(trial.params), trial.measurement,
                                 template.name)
            on_result(step)

    configs = sweep_budget(budget_evals, sweep) if sweeping else budget_evals
    result = tune_groupwise(template, evaluator, strategy=strategy, budget=configs,
                            limits=limits, seed=seed, batch=sweep if sweeping else (batch or workers),
                            first=[template.defaults], on_result=handle, stop=stop,
                            max_runs=budget_evals if sweeping else None, seeds=open_seeds(seeds, cache))
    return _summarize(name, match, template, result, str(template_path))


def open_seeds(seeds: SeedCache | str | None, cache: Any) -> SeedCache | None:
    """The seed files to use: "default" means the user's when the measurement cache is the user's."""
    if seeds == "default":
        return SeedCache() if cache == "default" else None
    if isinstance(seeds, (str, os.PathLike)):
        return SeedCache(seeds)
    return seeds


def open_cache(cache: TuneCache | str | None) -> TuneCache | None:
    """The tuning cache to use: a TuneCache (or any object with its `get`/`put`, e.g. a run store's
    measurements) as given, "default" for the user's cache (the folder in KW_TUNE_CACHE, else
    ~/.cache/kernelwright/tune), a path for a cache file there, None for none."""
    if cache is None or not isinstance(cache, (str, os.PathLike)):
        return cache
    if cache == "default":
        return TuneCache()
    return TuneCache(Path(cache))


def _summarize(name: str, match, template: Template, result: TuneResult, template_path: str) -> AutopilotResult:
    def verdict_of(m: Measurement | None):
        return Verdict.from_dict(m.verdict) if m and m.verdict else None

    default = next((t.measurement for t in result.trials if t.params == template.defaults), None)
    best = result.best
    tried = [(t.params, t.measurement.summary()) for t in result.trials]
    out = AutopilotResult(
        problem=name, matched=True, message="", template_name=template.name, template=template, tune=result,
        tried=tried, kernels=match.groups, template_path=template_path, default_verdict=verdict_of(default),
    )
    if best is None:
        reason = default.summary() if default else "nothing was judged"
        out.message = f"template {template.name} matched, but no instance passed the judge (default: {reason})"
        return out
    out.best_params = best.params
    out.best_source = template.instantiate(best.params)
    out.best_verdict = verdict_of(best.measurement)
    note = f" [{best.measurement.note}]" if best.measurement.note else ""
    cost = result.cost
    how = (f"measured in {cost.judge_runs} judge evaluation(s) (swept, the fastest judged in full)"
           if cost.judge_runs != cost.measured else "judged")
    out.message = (f"template {template.name}: {len(result.trials)} instance(s) {how} "
                   f"({cost.cached} from the cache), best {best.measurement.time_ms:.4g} ms{note}")
    return out


def _reference_match(problem_path, name: str):
    """For a reference that is a Triton or CUDA kernel, a template of its own launch configuration
    (tune/from_reference.py; the problem is not run here: a CUDA reference builds in the judge's
    sandbox only); a message when it offers nothing to tune; None for a PyTorch reference."""
    try:
        _, source = read_source(problem_path)
    except ProblemError as exc:
        return f"cannot load the problem: {exc}"
    kind = reference_kind(source)
    if kind == "torch":
        return None
    try:
        return templatize_reference(source, name)
    except NoTemplate as exc:
        return (f"{exc}. The reference is a {kind} kernel and the template library covers PyTorch references only: "
                "give --llm to let the agents rewrite it.")


def _no_template_message(problem, exc: Exception) -> str:

    try:
        kinds = forward_op_kinds(problem)
        what = f" (the forward does: {', '.join(kinds)})" if kinds else ""
    except Exception:  # noqa: BLE001 -- describing is best effort; the reason above already says why
        what = ""
    return (f"{exc}{what}. Without an LLM there is nothing more to do for this problem: give --llm to let "
            "the agents write a kernel.")


def has_gpu() -> bool:
    try:
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 -- a broken torch/CUDA install means no GPU here
        return False
