"""`kernelwright apply`: the user's model with its optimized regions put back, verified and timed.

1. For every run under RUN_OR_SUITE with a correct best candidate (results.py), the region its
   problem names (KW_REGION_PATHS) is replaced at each instance by the candidate's `ModelNew`
   with that instance's weights (patch.py). A region that cannot be put back is reported with its
   error and stays original.
2. Verification: the original and the patched model run on `trials` fresh inputs (random values
   shaped like the example inputs, seeded; integers uniform over the example's range), the same
   RNG seed before each; every output (and with `backward`, the gradient of every floating input
   and every parameter, for fixed random output gradients) is compared by the judge's own
   `judge.check.compare_tensor` under the tolerances of the runs' judge settings (JudgeConfig).
3. Timing: `judge.timing.measure`, the judge's own clock, called in this process (the user's model
   and the adopted candidates are trusted code here: no sandbox): on a GPU CUDA events with the L2
   flushed before each call, on a CPU the wall-clock median. The model's step (a forward, or a
   forward and a backward) is timed original, patched, and patched with each region alone: a
   region's contribution is the time it saves alone.
"""
from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.timing import measure  # at import: its clocks are captured before any candidate loads
from kernelwright.problem import ProblemError, load_candidate, load_problem

from .extract import resolve_device, to_device
from .patch import CandidateCallError, RegionError, Replacement, make_adapter, patched_copy
from .results import BestCandidate, best_candidates
from .spec import BuiltModel, absolute_spec, build_model
from .verify import compare_steps, step_callable, step_tensors


@dataclass
class RegionOutcome:
    problem: str
    run_dir: str
    paths: list[str] = field(default_factory=list)
    applied: bool = False
    error: str = ""
    candidate_speedup: float | None = None  # the judge's, on the region alone
    share: float | None = None  # of the step, at extraction
    alone_ms: float | None = None  # the step with this region alone patched
    saved_ms: float | None = None  # original step - alone
    calls: int = 0  # calls the candidate answered during verification
    fallbacks: int = 0  # calls unlike the extracted one, answered by the original submodule


@dataclass
class ApplyReport:
    spec: str
    device: str
    backward: bool
    timing_method: str = ""
    correct: bool = False
    message: str = ""  # the first mismatch, when not correct
    max_abs_err: float | None = None
    original_ms: float | None = None
    patched_ms: float | None = None
    speedup: float | None = None
    regions: list[RegionOutcome] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def fresh_like(value, gen: torch.Generator):
    """A random value like `value` (tensors only; everything else as it is)."""
    if not isinstance(value, torch.Tensor):
        return value
    if value.is_floating_point() or value.is_complex():
        return torch.randn(value.shape, dtype=value.dtype, generator=gen).to(value.device)
    if value.dtype == torch.bool:
        return torch.randint(0, 2, value.shape, generator=gen).bool().to(value.device)
    if not value.numel():
        return value.clone()
    low, high = int(value.min()), int(value.max())
    return torch.randint(low, high + 1, value.shape, generator=gen, dtype=value.dtype).to(value.device)


def fresh_inputs(built: BuiltModel, seed: int) -> tuple[tuple, dict]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(fresh_like(a, gen) for a in built.args), {k: fresh_like(v, gen) for k, v in built.kwargs.items()}


def load_region(best: BestCandidate, model: torch.nn.Module, outcome: RegionOutcome) -> list[Replacement]:
    """The region's replacements, one per instance; RegionError when any cannot be made."""
    try:
        problem = load_problem(best.problem)
    except ProblemError as exc:
        raise RegionError(f"its problem file does not load: {exc}") from None
    paths, args = getattr(problem.module, "KW_REGION_PATHS", None), getattr(problem.module, "KW_ARGS", None)
    if not paths or args is None:
        raise RegionError(f"{best.problem} was not written by `kernelwright extract` (no KW_REGION_PATHS / KW_ARGS)")
    outcome.paths, outcome.share = list(paths), getattr(problem.module, "KW_SHARE", None)
    with tempfile.TemporaryDirectory(prefix="kw-apply-") as folder:
        path = Path(folder) / "model_new.py"
        path.write_text(best.code)
        try:
            model_new = load_candidate(path).ModelNew
        except ProblemError as exc:
            raise RegionError(f"the best candidate does not load: {exc}") from None
        replacements = []
        for region_path in paths:
            try:
                original = model.get_submodule(region_path)
            except AttributeError:
                raise RegionError(f"the model has no submodule {region_path!r} (extracted from another model?)") from None
            replacements.append(make_adapter(model_new, problem.init_inputs(0), original, args, region_path))
    return replacements


def judge_config(bests: list[BestCandidate]):
    """The tolerances the runs were judged with (the first run that recorded its settings)."""
    for best in bests:
        if best.judge:
            try:
                return JudgeConfig.from_dict(best.judge)
            except (ValueError, TypeError):
                continue
    return JudgeConfig()


def _renames(replacements: list[Replacement]) -> dict[str, str]:
    """A patched model's parameter names -> the original model's."""
    return {new: old for r in replacements for old, new in r.names.items()}


def verify(original, patched, built: BuiltModel, replacements, config, device: str, backward: bool, trials: int,
           report: ApplyReport) -> None:
    rename = _renames(replacements)
    report.correct, report.max_abs_err = True, 0.0
    for trial in range(trials):
        seed = config.seed + trial
        args, kwargs = fresh_inputs(built, seed)
        expected = step_tensors(original, args, kwargs, seed, backward)
        got = step_tensors(patched, args, kwargs, seed, backward, rename)
        ok, message, worst = compare_steps(got, expected, config, device)
        report.max_abs_err = max(report.max_abs_err, worst)
        if not ok:
            report.correct, report.message = False, f"trial {trial} (seed {seed}): {message}"
            return


def time_step(model, built: BuiltModel, config, device: str, backward: bool):
    args, kwargs = fresh_inputs(built, config.seed)
    stats, _ = measure(step_callable(model, args, kwargs, backward, config.seed), config, device)
    return stats


def apply_candidates(spec: str, target: str | Path, inputs_spec: str | None = None, backward: bool = False,
                     device: str = "auto", trials: int = 3, time: bool = True):
    """(ApplyReport, the patched model) for the best candidates of the runs under `target`."""
    return apply_bests(spec, best_candidates(target), inputs_spec, backward, device, trials, time)


def apply_bests(spec: str, bests: list[BestCandidate], inputs_spec: str | None = None, backward: bool = False,
                device: str = "auto", trials: int = 3, time: bool = True):
    """(ApplyReport, the patched model): see the module docstring."""
    spec, inputs_spec = absolute_spec(spec), absolute_spec(inputs_spec) if inputs_spec else None
    device = resolve_device(device)
    built = to_device(build_model(spec, inputs_spec), device)
    config = judge_config(bests)
    report = ApplyReport(spec, device, backward)
    by_region: list[tuple[RegionOutcome, list[Replacement]]] = []
    for best in bests:
        outcome = RegionOutcome(best.problem, best.run_dir, candidate_speedup=best.speedup)
        report.regions.append(outcome)
        if not best.code:
            outcome.error = best.why
            continue
        try:
            replacements = load_region(best, built.model, outcome)
        except RegionError as exc:
            outcome.error = str(exc)
            continue
        outcome.applied = True
        by_region.append((outcome, replacements))
    while True:  # a region whose candidate raises in the model is left original, the rest verified again
        every = [r for _, rs in by_region for r in rs]
        patched = patched_copy(built.model, every)
        try:
            verify(built.model, patched, built, every, config, device, backward, trials, report)
            break
        except CandidateCallError as exc:
            failed = next(i for i, (_, rs) in enumerate(by_region) if any(r.path == exc.path for r in rs))
            outcome, _ = by_region.pop(failed)
            outcome.applied, outcome.error = False, f"it raised in the model: {exc}"
    for outcome, replacements in by_region:
        outcome.calls = sum(r.adapter.calls for r in replacements)
        outcome.fallbacks = sum(r.adapter.fallbacks for r in replacements)
    if time and by_region and report.correct:
        original = time_step(built.model, built, config, device, backward)
        report.timing_method, report.original_ms = original.method, original.median_ms
        report.patched_ms = time_step(patched, built, config, device, backward).median_ms
        report.speedup = report.original_ms / report.patched_ms if report.patched_ms else None
        for outcome, replacements in by_region:
            alone = report.patched_ms if len(by_region) == 1 else \
                time_step(patched_copy(built.model, replacements), built, config, device, backward).median_ms
            outcome.alone_ms, outcome.saved_ms = alone, report.original_ms - alone
    return report, patched


def summary_text(report: ApplyReport) -> str:
    """The report in a few lines: correctness, end-to-end times, each region's part."""
    applied = [r for r in report.regions if r.applied]
    step = "forward+backward" if report.backward else "forward"
    lines = [f"model: {report.spec} ({step} on {report.device}); {len(applied)} of {len(report.regions)} region(s) put back"]
    if applied:
        lines.append(f"outputs{' and gradients' if report.backward else ''} vs the original: "
                     + ("within the judge's tolerances" if report.correct else f"MISMATCH: {report.message}")
                     + (f" (max abs error {report.max_abs_err:.3g})" if report.max_abs_err is not None else ""))
    if report.speedup is not None:
        lines.append(f"end to end: {report.original_ms:.4g} ms -> {report.patched_ms:.4g} ms, "
                     f"{report.speedup:.3f}x ({report.timing_method}"
                     + (", CPU wall time: not GPU performance" if report.timing_method == "wall_cpu" else "") + ")")
    for r in report.regions:
        where = ", ".join(r.paths) or Path(r.problem).name
        if not r.applied:
            lines.append(f"  {where}: left original: {r.error}")
            continue
        part = f"  {where}: candidate {r.candidate_speedup:.3g}x alone in its problem" if r.candidate_speedup else f"  {where}:"
        if r.share is not None:
            part += f", {r.share:.1%} of the step at extraction"
        if r.saved_ms is not None:
            part += f"; in the model alone {r.alone_ms:.4g} ms, saves {r.saved_ms:.4g} ms"
        if r.fallbacks:
            part += f"; {r.fallbacks} call(s) unlike the extracted one ran the original"
        lines.append(part)
    return "\n".join(lines)
