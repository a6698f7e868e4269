"""The judge worker: `python -m kernelwright.judge.worker REQUEST.json [--phase evaluate|compile]`.

Runs in a fresh sandboxed process per candidate, forked by the judge's supervisor
(`supervisor.py`), which confines it before any of this runs: it may write only its work and
output folders, so what must land in the shared caches (extension builds, baselines) is asked of
the supervisor (`service`). The order of work is the defence:

1. import the judge's own modules (the timer and the guards capture the real timing and sync
   functions), force full fp32, load the problem (sizes overridden / shrunk);
2. compute the reference outputs of *every* trial before any candidate code exists in the
   process, so the candidate cannot patch the reference;
3. snapshot the identity of guarded functions and the precision switches;
4. load the candidate with the build cache installed, check signatures, build ModelNew with the
   reference's seed;
5. correctness trials on poisoned memory, then the hack guards; 6. timing, energy, baselines,
   floor; 7. the profile, when asked for.

Several workers may share a GPU: correctness work holds the device's lock shared, timing,
energy and profiling hold it exclusively (`gpulock`). Wall seconds per stage go to
`verdict.stage_seconds`. The verdict is written to the result file at every stage, so a crash
still leaves the last stage reached; the final write happens before the process exits.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .api import JudgeRequest
from .config import JudgeConfig
from .stagetimes import StageTimer, process_age_s
from .verdict import ERROR, FAIL, INFO, PASS, REJECT, CompileResult, Flag, TrialResult, Verdict

_perf_counter = time.perf_counter  # captured before candidate code can replace it
# share of the GPU's free memory the reference outputs of all trials may keep on the device
REFERENCE_MEMORY_SHARE = 0.25


class ResultWriter:
    """Atomic writes of the (partial) verdict and one-line progress marks for the parent's clock."""

    def __init__(self, request: JudgeRequest, token: str, timer: StageTimer | None = None):
        self.result_path, self.progress_path, self.token = Path(request.result_path), Path(request.progress_path), token
        self.timer = timer  # stage times so far go into every write: a crash keeps where the time went

    def progress(self, line: str) -> None:
        with open(self.progress_path, "a") as fh:
            fh.write(line + "\n")

    def stage(self, verdict: Verdict, stage: str) -> None:
        verdict.stage = stage
        self.progress(f"stage {stage}")
        self.write(verdict, complete=False)

    def write(self, verdict: Verdict, complete: bool) -> None:
        if self.timer is not None:
            verdict.stage_seconds.update(self.timer.rounded())
        payload = {"token": self.token, "complete": complete, "verdict": verdict.to_dict()}
        tmp = self.result_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, default=_jsonable))
        os.replace(tmp, self.result_path)


def _jsonable(obj: Any) -> Any:
    return obj.item() if hasattr(obj, "item") else str(obj)


def optional_module(name: str, notes: list[str]):
    """One of the judge's GPU-side modules (timing, compile, baseline, floor, env), or None when it
    cannot be imported; the verdict then carries a note saying so."""
    try:
        return importlib.import_module(f"kernelwright.judge.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"kernelwright.judge.{name}":
            notes.append(f"kernelwright.judge.{name} failed to import: {exc}")
        else:
            notes.append(f"kernelwright.judge.{name} is not installed")
    except Exception as exc:  # noqa: BLE001 - a broken judge module must not hide the verdict
        notes.append(f"kernelwright.judge.{name} failed to import: {type(exc).__name__}: {exc}")
    return None


@dataclass
class Session:
    """Everything one evaluation accumulates, stage by stage."""

    request: JudgeRequest
    config: JudgeConfig
    verdict: Verdict
    writer: ResultWriter
    modules: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    device: str = "cpu"
    problem: Any = None
    problem_path: Path | None = None
    candidate_path: Path | None = None
    candidate_source: str = ""
    cases: list = field(default_factory=list)
    refill: Any = None
    ref_mutates: list[int] = field(default_factory=list)  # inputs the reference writes in place
    backward: Any = None  # grad.GradRunner when the backward pass is part of the work
    ref_ops: dict[str, int] = field(default_factory=dict)
    snapshot: Any = None
    precision_before: dict = field(default_factory=dict)
    dynamo_before: int = 0
    model: Any = None
    recorder: Any = None  # the build cache's BuildRecorder, when the compile module is present
    patched: set = field(default_factory=set)  # guarded names already reported as replaced
    compile_tracker: Any = None  # counts torch.compile / dynamo entry calls by the candidate
    own: Any = None  # own_code.OwnCode: the candidate's Triton launches and extension calls
    dynamo_patched: bool = False
    triton_compile_error: bool = False
    stopped: bool = False  # a stage decided the verdict; later stages are skipped
    timer: StageTimer = field(default_factory=StageTimer)
    lock: Any = None  # gpulock.DeviceLock (or NoLock) of the device, once it is known

    def flag(self, flag: Flag | None) -> None:
        if flag is not None and all((f.code, f.message) != (flag.code, flag.message) for f in self.verdict.flags):
            self.verdict.flags.append(flag)

    def stop(self, status: str, error: str, stage: str | None = None) -> bool:
        self.verdict.status, self.verdict.error, self.stopped = status, error, True
        if stage:
            self.verdict.stage = stage
        return False

    @contextlib.contextmanager
    def on_device(self, kind: str):
        """Hold the device lock ("shared" for correctness work, "exclusive" for timing); the wait is
        its own stage, and the parent's stage clock does not count it against the stage's budget."""
        if self.lock is None:
            yield
            return
        with contextlib.ExitStack() as held:
            self.writer.progress("wait start")
            with self.timer("wait_gpu"):
                held.enter_context(self.lock.shared() if kind == "shared" else self.lock.exclusive())
            self.writer.progress("wait end")
            yield


# --------------------------------------------------------------------------- files


def materialise(request: JudgeRequest) -> tuple[Path, Path]:
    """Paths of the problem and candidate files, writing given source text into the cwd."""
    problem = Path(request.problem_path) if request.problem_path else _write_source(
        Path("problem"), request.problem_name, request.problem_source or "")
    return problem, materialise_candidate(request)


def _write_source(folder: Path, name: str, text: str) -> Path:
    from .api import source_filename

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / source_filename(name)
    path.write_text(text)
    return path


def describe_exception(exc: BaseException, path: Path | None, what: str) -> str:
    from ..problem.errors import line_in_file

    line = line_in_file(exc, path) if path else None
    where = f" ({path}, line {line})" if line else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > 1500:
        text = text[:1500] + " [...]"
    return f"{what} raised {text}{where}"


def is_triton_compile_error(exc: BaseException) -> bool:
    kind = type(exc)
    return kind.__module__.startswith("triton") and "Compil" in kind.__name__


# --------------------------------------------------------------------------- stage: load


def stage_load(s: Session) -> bool:
    """Load the problem and compute every trial's reference output, before any candidate code."""
    import torch

    from ..problem import ProblemError, load_problem
    from ..problem.ops import record_aten_ops
    from ..problem.reference import TritonLaunchRecorder, describe_reference
    from . import check, grad, guards
    from . import reference as refside

    s.writer.stage(s.verdict, "load")
    with s.timer("setup"):
        try:
            s.device = resolve_device(s.config)
        except RuntimeError as exc:
            return s.stop(ERROR, str(exc))
        if s.device == "cpu":
            guards.enable_malloc_perturb()  # fresh CPU allocations read as poison (see guards)
        s.verdict.device = s.device
        s.verdict.environment = environment(s)
        s.lock = device_lock(s)
        guards.set_full_precision(s.config.allow_tf32)
        shrink = s.config.shrink if s.config.shrink is not None else not s.device.startswith("cuda")
        refusal = refside.cannot_run_here(_read(s.problem_path), s.device)
        if refusal:
            return s.stop(ERROR, f"cannot judge here: {refusal}")
        builds = install_build_cache(s)  # the reference's own extensions build through the cache too
        try:
            s.problem = load_problem(s.problem_path, overrides=s.config.overrides, shrink=shrink)
        except ProblemError as exc:
            return s.stop(ERROR, f"cannot load the problem: {exc}{refside.build_note(builds)}")
        s.verdict.overrides, s.verdict.shrunk = dict(s.problem.overrides), s.problem.shrunk
        s.backward = grad.runner_for(s.problem, s.device)
    sync = lambda: guards.synchronize(s.device)  # noqa: E731
    with s.on_device("shared"), s.timer("reference"):
        try:
            reference = s.problem.make_model(s.config.seed, s.device)
            s.cases, s.refill, s.ref_mutates = check.reference_cases(
                s.problem, reference, s.config.trials, s.config.seed, s.device, sync,
                device_budget_bytes=reference_budget(s.device))
            inputs = check.make_inputs(s.problem, s.config.seed, s.cases[0].variant, s.device)
            with TritonLaunchRecorder() as launches:
                s.ref_ops = dict(record_aten_ops(reference, *inputs))
            if s.backward is not None:  # the backward's ops are the reference's work too
                s.ref_ops.update(s.backward.reference(reference, s.cases + [s.refill], sync))
        except Exception as exc:  # noqa: BLE001 - the problem's own code failed
            return s.stop(ERROR, describe_exception(exc, s.problem_path, "the reference Model (problem file)"))
        del reference, inputs
    s.verdict.reference = refside.record(describe_reference(s.problem), launches.counts, s.ref_ops, s.ref_mutates,
                                         refside.reference_build(builds))
    _record_precision(s, torch)
    seal_baseline_parameters(s)
    return True


def device_lock(s: Session):
    from . import gpulock, service
    from .api import default_cache_dir

    lock = gpulock.lock_for(s.device, default_cache_dir(s.config))
    if isinstance(lock, gpulock.NoLock):
        s.notes.append(lock.why)
    elif service.available():  # confined: the lock files are made by the supervisor
        try:
            service.call("lock", folder=str(lock.folder), key=lock.key)
        except service.ServiceError as exc:
            s.notes.append(f"device lock files: {exc}")
    return lock


def seal_baseline_parameters(s: Session) -> None:
    """Tell the supervisor, before any candidate code exists in this process, what its baselines
    are measured for (sizes, device, the device's name): it accepts these once, so a candidate
    cannot have baselines measured, and cached, for other parameters in its name."""
    from . import service

    if not service.available():
        return
    env = s.modules.get("env")
    try:
        name = env.device_name(s.device) if env is not None else ""
        service.call("seal", overrides=dict(s.problem.overrides), device=s.device, device_name=name)
    except Exception as exc:  # noqa: BLE001 - no baselines then; the candidate is still judged
        s.notes.append(f"baseline parameters not sealed: {exc}")


def reference_budget(device: str) -> int:
    """Bytes of reference outputs that may stay on the GPU (a share of its free memory)."""
    if not device.startswith("cuda"):
        return 0
    import torch

    try:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    except Exception:  # noqa: BLE001 - unknown: keep them on the CPU
        return 0
    return int(free * REFERENCE_MEMORY_SHARE)


def resolve_device(config: JudgeConfig) -> str:
    import torch

    if config.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if config.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"device {config.device!r} was asked for but torch sees no CUDA GPU")
    return config.device


def environment(s: Session) -> dict[str, Any]:
    env = s.modules.get("env")
    if env is not None:
        try:
            return dict(env.environment(s.device))
        except Exception as exc:  # noqa: BLE001 - a missing field must not cost the verdict
            s.notes.append(f"env.environment failed: {exc}")
    import platform

    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "triton_interpret": os.environ.get("TRITON_INTERPRET", "")}


def _record_precision(s: Session, torch) -> None:
    from . import guards

    from . import check

    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in s.cases[0].ref_outputs})
    tolerances = {d: dict(zip(("atol_rtol", "rel_l2"), s.config.tolerance_for(d))) for d in dtypes}
    s.verdict.precision = {"reference_dtypes": dtypes, "allow_tf32": s.config.allow_tf32,
                           "settings": guards.precision_state(), "tolerances": tolerances,
                           "atol_rule": "|out-ref| <= atol*S + rtol*|ref|, S = max(1, RMS(ref)) per output",
                           "inputs_on_device": check.inputs_on_device(s.problem, s.device),
                           "reference_on_device_bytes": check.on_device_bytes(s.cases)}


# --------------------------------------------------------------------------- stage: compile


def stage_compile(s: Session) -> bool:
    """Import the candidate (this is where C++/CUDA extensions build) and construct ModelNew."""
    from ..problem import ProblemError, check_signatures, load_candidate
    from . import candidate_kinds, guards, own_code

    s.writer.stage(s.verdict, "compile")
    with s.timer("compile"):
        recorder = s.recorder = install_build_cache(s)
        s.own = own_code.OwnCode().install()  # after the build cache: it wraps the cached builders
        s.compile_tracker = guards.CompileTracker().install()
        s.snapshot = guards.IdentitySnapshot.take(guards.guarded_targets({"problem": s.problem.module}))
        s.precision_before, s.dynamo_before = guards.precision_state(), guards.dynamo_frames()
        static_flags(s, candidate_kinds)
        start = _perf_counter()
        try:
            module = load_candidate(s.candidate_path)
            check_signatures(s.problem, module.ModelNew, s.candidate_path)
        except BaseException as exc:  # noqa: BLE001 - ProblemError, or SystemExit from the candidate
            message = str(exc) if isinstance(exc, ProblemError) else describe_exception(exc, s.candidate_path, "import")
            s.verdict.compile = compile_result(s, recorder, _perf_counter() - start, message)
            return s.stop(ERROR, f"the candidate does not load: {message}{_compile_errors(s.verdict.compile, message)}")
        s.verdict.compile = compile_result(s, recorder, _perf_counter() - start, None)
        with s.on_device("shared"):
            try:
                s.model = s.problem.make_model(s.config.seed, s.device, cls=module.ModelNew)
            except BaseException as exc:  # noqa: BLE001 - candidate code
                return s.stop(ERROR, describe_exception(exc, s.candidate_path, "ModelNew(*get_init_inputs())"))
            after_call_guards(s, "while loading the candidate")
    return True


def install_build_cache(s: Session):
    kwcompile = s.modules.get("compile")
    if kwcompile is None:
        return None
    from .api import default_cache_dir

    try:
        return kwcompile.install_build_cache(default_cache_dir(s.config))
    except Exception as exc:  # noqa: BLE001 - fall back to uncached builds
        s.notes.append(f"build cache unavailable: {exc}")
        return None


def compile_result(s: Session, recorder, seconds: float, error: str | None) -> CompileResult:
    from . import candidate_kinds

    result = None
    if recorder is not None:
        try:
            result = recorder.result()
        except Exception as exc:  # noqa: BLE001
            s.notes.append(f"build recorder failed: {exc}")
    if result is None:
        result = CompileResult(ok=error is None, seconds=round(seconds, 3))
    if result.backend in ("", "none"):  # nothing was built ahead of time: say what the source uses
        result.backend = candidate_kinds.backend_of(s.candidate_source)
    if error is not None:
        result.ok = False
        result.errors = result.errors or [error]
        result.log = result.log or error
    return result


def _compile_errors(result: CompileResult, message: str) -> str:
    """The build's first errors (from the build cache's log), where they add to the message."""
    extra = [e for e in result.errors[:3] if e != message]
    return (" Compiler errors: " + " | ".join(extra)) if extra else ""


def static_flags(s: Session, candidate_kinds) -> None:
    for finding in candidate_kinds.scan(s.candidate_source):
        check = "source_torch_compile" if finding.code == "torch_op" else "source_introspection"
        s.flag(Flag(finding.code, REJECT, f"{s.candidate_path}, line {finding.line}: uses {finding.what}: {finding.why}",
                    check=check))


def after_call_guards(s: Session, when: str) -> None:
    """Monkeypatching and precision changes since the snapshot; both are flagged, then undone."""
    with s.timer("guards"):
        _after_call_guards(s, when)


def _after_call_guards(s: Session, when: str) -> None:
    from . import guards

    changed = s.snapshot.changes()
    if any(name in guards.DYNAMO_PATCHES for name in changed):
        s.dynamo_patched = True  # dynamo ran: reported as torch_op, not as the candidate's patching
        changed = [name for name in changed if name not in guards.DYNAMO_PATCHES]
    new = [name for name in changed if name not in s.patched]
    if new:
        s.patched.update(new)
        s.flag(guards.monkeypatch_flag(new, when))
    if changed:
        s.snapshot.restore(changed)
    now = guards.precision_state()
    flag = guards.precision_flag(s.precision_before, now, s.config.allow_tf32)
    if flag is not None:
        s.flag(flag)
        guards.set_full_precision(s.config.allow_tf32)


# --------------------------------------------------------------------------- stage: check


def call_candidate(s: Session, args: list, case, when: str = "during a trial", recorder=None):
    """One forward of ModelNew on poisoned memory, device-wide synchronised; (outputs, None) or
    (None, exception). With `recorder` (an OpRecorder) the ATen ops the forward executes are counted."""
    import contextlib

    import torch

    from . import check, guards

    # after the inputs exist: every free block the candidate may now be handed holds poison
    guards.poison_allocator(s.device, guards.tensor_bytes(case.ref_outputs))
    torch.manual_seed(case.seed)
    try:
        with recorder or contextlib.nullcontext(), torch.no_grad() if s.backward is None else contextlib.nullcontext():
            out = s.model(*args) if s.backward is None else s.backward.forward(s.model, args, case.seed)
        guards.synchronize(s.device)
        return check.flatten_outputs(out), None
    except BaseException as exc:  # noqa: BLE001 - candidate code: anything becomes a verdict
        return None, exc
    finally:
        after_call_guards(s, when)


def run_trial(s: Session, case, recorder=None) -> tuple[TrialResult, list | None, bool]:
    """One trial on freshly generated inputs in poisoned memory: (result, the input buffers, raised)."""
    from . import check, grad, guards, inplace

    s.writer.progress(f"trial {case.index} {case.variant}")
    result = TrialResult(trial=case.index, seed=case.seed, variant=case.variant, ok=False,
                         fallback_from=case.fallback_from)
    args = check.make_inputs(s.problem, case.seed, case.variant, s.device)
    before = [check.fingerprint(a) for a in args]
    outs, exc = call_candidate(s, args, case, recorder=recorder)
    if exc is not None:
        result.message = describe_exception(exc, s.candidate_path, "ModelNew.forward")
        s.triton_compile_error = is_triton_compile_error(exc)
        return result, args, True
    cmp = check.compare(outs, case.ref_outputs, s.config, s.device)
    result.ok, result.message = cmp.ok, cmp.message
    result.shape_ok, result.dtype_ok, result.nonfinite = cmp.shape_ok, cmp.dtype_ok, cmp.nonfinite
    result.max_abs_err, result.max_rel_err, result.rel_l2_err = cmp.max_abs_err, cmp.max_rel_err, cmp.rel_l2_err
    result.atol_scale = cmp.atol_scale
    result.error_ratio, result.rel_l2_ratio = cmp.error_ratio, cmp.rel_l2_ratio
    s.verdict.precision.setdefault("candidate_dtypes", sorted({str(o.dtype).removeprefix("torch.") for o in outs}))
    mutated = [i for i, (a, b) in enumerate(zip(args, before)) if check.fingerprint(a) != b]
    unexpected = inplace.unexpected_writes(mutated, s.ref_mutates)
    if unexpected:
        s.flag(guards.mutation_flag(unexpected))
    inplace.merge_into(result, inplace.compare_written(args, case, s.config, s.device))
    if s.backward is not None:
        grad.merge_into(result, s.backward.compare(case, s.config))
    if cmp.poisoned and not cmp.ok:
        s.flag(guards.uninitialized_flag(cmp.poisoned))
    return result, args, False


def stage_check(s: Session) -> bool:
    """All trials; the output-cache guard reuses trial 0's buffers. The first and the last trial run
    under the op recorder (a CUDA graph captured in the first call replays invisibly later), and the
    candidate's own launches are counted over every call of the stage."""
    from ..problem.ops import OpRecorder
    from . import check, guards

    s.writer.stage(s.verdict, "check")
    recorders = {id(case): OpRecorder(origin=s.own.origin) for case in (s.cases[0], s.cases[-1])}
    s.own.reset()  # launches while ModelNew was built do not count
    with s.on_device("shared"), s.timer("check"):
        for case in s.cases:
            result, args, raised = run_trial(s, case, recorders.get(id(case)))
            case.pinned = []  # trial 0 ran while the reference's outputs were still held: now free them
            s.verdict.trials.append(result)
            s.writer.write(s.verdict, complete=False)
            if raised:
                return _stop_on_exception(s, result)
            if case is s.cases[0] and result.ok:
                with s.timer("guards"):
                    guard_output_cache(s, args)
            del args
    buckets = merged_buckets([r.buckets for r in recorders.values()])
    s.verdict.ops = dict(buckets.get("python", {}))
    s.verdict.precision["margin"] = check.margin(s.verdict.trials)
    with s.timer("guards"):
        judge_work(s, buckets)
        s.flag(guards.dynamo_flag(s.dynamo_before, s.compile_tracker.calls, s.dynamo_patched))
    s.own.uninstall()  # the timer measures the candidate without the counting wrappers
    return True


def merged_buckets(recorded: list[dict]) -> dict:
    """Per bucket and op, the larger count of the recorded calls (each records one forward)."""
    from collections import Counter

    merged: dict = {}
    for buckets in recorded:
        for bucket, counts in buckets.items():
            mine = merged.setdefault(bucket, Counter())
            for name, count in counts.items():
                mine[name] = max(mine[name], count)
    return merged


def judge_work(s: Session, buckets: dict) -> None:
    """The rule set's checks on whose code did the work (judge/work.py)."""
    from ..rules import get
    from . import work

    record, flags = work.evaluate(get(s.config.rules), s.ref_ops, buckets, s.own.launches(),
                                  extension_libraries(s), s.candidate_source)
    s.verdict.work = record
    for flag in flags:
        s.flag(flag)


def extension_libraries(s: Session) -> list[str]:
    """The shared libraries of the extensions the candidate built or loaded."""
    found = list(s.own.libraries)
    for record in getattr(s.recorder, "records", []) or []:
        if record.ok and record.build_dir:
            found += [str(p) for p in sorted(Path(record.build_dir).glob("*.so")) if str(p) not in found]
    return found


def _stop_on_exception(s: Session, result: TrialResult) -> bool:
    text = result.message
    if s.triton_compile_error:  # Triton compiles at the first launch: report it as a build error
        s.verdict.compile = triton_compile_failure(s, text)
        return s.stop(ERROR, f"the Triton kernel does not compile: {text}", stage="compile")
    return s.stop(FAIL, f"trial {result.trial} ({result.variant} inputs): {text}")


def triton_compile_failure(s: Session, text: str) -> CompileResult:
    if s.recorder is not None:
        try:
            s.recorder.record_failure(text, backend="triton")
            return s.recorder.result()
        except Exception as exc:  # noqa: BLE001
            s.notes.append(f"build recorder failed: {exc}")
    return CompileResult(ok=False, backend="triton", log=text, errors=[text])


def guard_output_cache(s: Session, args: list) -> None:
    """Refill trial 0's *same* input buffers in place with other values and call again: the output
    must follow the new values, not repeat the first call's (a cache keyed on data_ptr or shape)."""
    from . import check, guards

    first, second = s.cases[0], s.refill
    s.writer.progress("trial refill")
    fresh = check.make_inputs(s.problem, second.seed, second.variant, s.device)
    for buffer, values in zip(args, fresh):
        if hasattr(buffer, "copy_"):
            buffer.copy_(values)
    del fresh
    outs, exc = call_candidate(s, args, second, "during the output-cache check")
    if exc is not None:
        s.flag(Flag("output_cache", REJECT, describe_exception(exc, s.candidate_path,
                                                               "a second call of ModelNew.forward"),
                    check="output_refill"))
        return
    cmp = check.compare(outs, second.ref_outputs, s.config, s.device)
    if not cmp.ok:
        stale = check.compare(outs, first.ref_outputs, s.config, s.device).ok
        s.flag(guards.output_cache_flag("it returned the previous call's output" if stale else cmp.message))


# --------------------------------------------------------------------------- stage: time


def stage_time(s: Session) -> None:
    import torch

    from . import check

    timing = s.modules.get("timing")
    s.writer.stage(s.verdict, "time")
    if timing is None:
        s.flag(Flag("timing_unavailable", INFO, "no timing: " + "; ".join(n for n in s.notes if "timing" in n)))
        return
    first = s.cases[0]
    with s.timer("time"):
        args = check.make_inputs(s.problem, first.seed, first.variant, s.device)
        forward = lambda: s.model(*args)  # noqa: E731
        try:
            with s.on_device("exclusive"), torch.no_grad():
                if s.backward is not None:  # forward + backward is the work
                    forward = s.backward.timed_call(s.model, args, first.seed)
                stats, flags = timing.measure(forward, s.config, s.device)
                with s.timer("energy"):
                    s.verdict.energy = measure_energy(s, timing, forward)
                with s.timer("kernels"):
                    from . import kernel_times
                    s.verdict.kernels = kernel_times.measure(forward, s.device)
        except BaseException as exc:  # noqa: BLE001 - candidate code runs inside measure
            s.stop(FAIL, describe_exception(exc, s.candidate_path, "ModelNew.forward (while being timed)"))
            return
        finally:
            after_call_guards(s, "while being timed")
    s.verdict.timing = stats
    if s.backward is not None:
        stats.note = "; ".join(filter(None, [stats.note, "forward + backward"]))
    for flag in flags:
        s.flag(flag)
    baselines_and_floor(s)


def measure_energy(s: Session, timing, forward) -> dict:
    """Joules per call (GPU), or why not; a failing meter never costs the verdict."""
    measure = getattr(timing, "energy_per_call", None)
    if measure is None:
        return {"available": False, "reason": "this judge's timing module has no energy_per_call"}
    try:
        return measure(forward, s.config, s.device)
    except Exception as exc:  # noqa: BLE001 - the meter, not the candidate (its errors surfaced in measure)
        return {"available": False, "reason": f"energy measurement failed: {type(exc).__name__}: {exc}"}


def baselines_and_floor(s: Session) -> None:
    finalize(s, final=False)
    s.writer.progress("baseline")
    s.writer.write(s.verdict, complete=False)
    baseline = s.modules.get("baseline")
    if baseline is not None and s.config.baselines:
        # not under the device lock: each baseline process takes it around its own measurement
        with s.timer("baselines"):
            try:
                s.verdict.baselines = get_baselines(s, baseline)
                for flag in baseline.noise_flags(s.verdict.baselines):
                    s.flag(flag)
            except Exception as exc:  # noqa: BLE001 - the candidate's verdict stands without them
                s.flag(Flag("baseline_unavailable", INFO, f"baselines failed: {type(exc).__name__}: {exc}"))
    s.verdict.speedup = speedups(s.verdict)
    floor = s.modules.get("floor")
    if floor is not None:
        with s.timer("floor"):
            try:
                apply_floor(s, floor)
            except Exception as exc:  # noqa: BLE001
                s.flag(Flag("floor_unavailable", INFO, f"speed-of-light floor failed: {type(exc).__name__}: {exc}"))


def get_baselines(s: Session, baseline):
    """From the supervisor (it measures and caches them; this process may not write the cache),
    for the parameters sealed before the candidate was loaded; in-process where there is none."""
    from . import service
    from .verdict import Baselines, _build

    if service.available():
        return _build(Baselines, service.call("baselines")["baselines"])
    return baseline.get_baselines(s.problem_path, dict(s.problem.overrides), s.config, s.device)


def speedups(verdict: Verdict) -> dict[str, float]:
    if verdict.timing is None or verdict.baselines is None or verdict.timing.median_ms <= 0:
        return {}
    result = {}
    for name in ("eager", "compile_default", "compile_max_autotune"):
        stats = getattr(verdict.baselines, name, None)
        if stats is not None and stats.median_ms > 0:
            result[name] = round(stats.median_ms / verdict.timing.median_ms, 4)
    return result


def apply_floor(s: Session, floor) -> None:
    found = floor.compute_floor(s.problem, s.device)
    if found is None:
        return
    applied = floor.apply(found, s.verdict.timing) if s.verdict.timing is not None else found
    flags = []
    if isinstance(applied, tuple):  # (Floor, flags) or (Floor, flag)
        applied, extra = applied
        flags = list(extra) if isinstance(extra, (list, tuple)) else [extra]
    s.verdict.floor = applied
    for flag in flags:
        s.flag(flag)


# --------------------------------------------------------------------------- stage: profile


def stage_profile(s: Session) -> None:
    """kernelwright.profile's report of a passing candidate, with the device held exclusively."""
    from .profiling import profile_report

    s.writer.stage(s.verdict, "profile")
    with s.timer("profile"), s.on_device("exclusive"):
        s.verdict.profile = profile_report(s.problem_path, s.candidate_path, s.verdict, s.config, s.device)


# --------------------------------------------------------------------------- verdict


def finalize(s: Session, final: bool = True) -> None:
    verdict = s.verdict
    verdict.stage_seconds.update(s.timer.rounded())
    if not s.stopped:
        trials_ok = len(verdict.trials) >= s.config.trials and all(t.ok for t in verdict.trials)
        verdict.status = PASS if trials_ok and not verdict.reject_flags() else FAIL
        verdict.error = None if verdict.status == PASS else summarize_failure(verdict)
        if final:
            verdict.stage = "done"
    for note in s.notes if final else []:
        s.flag(Flag("judge_note", INFO, note))


def summarize_failure(verdict: Verdict) -> str:
    parts = []
    failed = [t for t in verdict.trials if not t.ok]
    if failed:
        t = failed[0]
        parts.append(f"{len(failed)} of {len(verdict.trials)} trials failed; trial {t.trial} "
                     f"(seed {t.seed}, {t.variant} inputs): {t.message}")
    parts += [f"[{f.code}] {f.message}" for f in verdict.reject_flags()]
    return "; ".join(parts) or "the candidate did not pass"


def run_stages(s: Session) -> None:
    if not stage_load(s) or not stage_compile(s) or not stage_check(s):
        return
    if s.config.time and s.verdict.status != FAIL:
        finalize(s, final=False)
        if s.verdict.status == PASS:
            stage_time(s)
    if s.config.profile and not s.stopped:
        finalize(s, final=False)
        if s.verdict.status == PASS:
            stage_profile(s)


def evaluate(request: JudgeRequest, writer: ResultWriter, modules: dict[str, Any], notes: list[str],
             timer: StageTimer | None = None) -> Verdict:
    config = JudgeConfig.from_dict(request.config)
    verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, config=config.to_dict(),
                      rules=config.rules)
    s = Session(request, config, verdict, writer, modules=modules, notes=notes, timer=timer or StageTimer())
    try:
        s.problem_path, s.candidate_path = materialise(request)
        s.candidate_source = _read(s.candidate_path)
        run_stages(s)
    except Exception:  # noqa: BLE001 - a judge bug: say so rather than blame the candidate
        s.stop(ERROR, "internal judge error: " + traceback.format_exc(limit=6)[-2000:])
    finalize(s)
    return verdict


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""  # load_candidate reports the unreadable file


def compile_only(request: JudgeRequest, writer: ResultWriter, modules: dict[str, Any]) -> Verdict:
    """Phase A of the pool: import the candidate so its extensions land in the shared build cache."""
    from ..problem import ProblemError, load_candidate

    config = JudgeConfig.from_dict(request.config)
    verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, stage="compile",
                      config=config.to_dict())
    s = Session(request, config, verdict, writer, modules=modules)
    s.candidate_path = materialise_candidate(request)
    s.candidate_source = _read(s.candidate_path)
    recorder = install_build_cache(s)
    start = _perf_counter()
    try:
        load_candidate(s.candidate_path)
        verdict.compile = compile_result(s, recorder, _perf_counter() - start, None)
    except BaseException as exc:  # noqa: BLE001
        message = str(exc) if isinstance(exc, ProblemError) else describe_exception(exc, s.candidate_path, "import")
        verdict.compile = compile_result(s, recorder, _perf_counter() - start, message)
        verdict.error = message
    return verdict


def materialise_candidate(request: JudgeRequest) -> Path:
    if request.candidate_path:
        return Path(request.candidate_path)
    return _write_source(Path("."), request.candidate_name, request.candidate_source or "")


# --------------------------------------------------------------------------- entry point


def load_judge_modules(notes: list[str]) -> dict[str, Any]:
    """Step 1: the judge's own modules, before anything of the candidate exists in the process.
    Importing timing captures the original timing functions; importing torch._dynamo now keeps its
    import-time patches (it wraps torch.manual_seed) out of the monkeypatch comparison."""
    from . import guards

    guards.die_with_parent()
    guards.apply_rlimits_from_env()
    modules = {name: optional_module(name, notes) for name in ("timing", "compile", "baseline", "floor", "env")}
    try:
        import torch._dynamo  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - dynamo is optional for the judge itself
        notes.append(f"torch._dynamo unavailable: {exc}")
    return {k: v for k, v in modules.items() if v is not None}


def read_token() -> str:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        return sys.stdin.readline().strip()
    except (OSError, ValueError):
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.worker", description=__doc__.split("\n")[0])
    parser.add_argument("request", help="request JSON written by kernelwright.judge.api")
    parser.add_argument("--phase", choices=("evaluate", "compile"), default="evaluate")
    args = parser.parse_args(argv)
    timer = StageTimer()
    startup = process_age_s()
    if startup is not None:
        timer.seconds["startup"] = startup  # interpreter start and the judge's first imports
    token = read_token()
    request = JudgeRequest.load(args.request)
    writer = ResultWriter(request, token, timer)
    notes: list[str] = []
    with timer("imports"):
        modules = load_judge_modules(notes)
    if "env" in modules:  # the environment names no cache: the request does
        modules["env"].use_cache_root(request.config.get("cache_dir"))
    if args.phase == "compile":
        verdict = compile_only(request, writer, modules)
        verdict.stage_seconds.update(timer.rounded())
    else:
        verdict = evaluate(request, writer, modules, notes, timer)
    writer.write(verdict, complete=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # candidate threads must not keep the process alive
