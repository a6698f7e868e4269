"""Stage 2, compile: install the build cache and the counting wrappers, take the identity snapshot
and the precision switches, *then* import the candidate (this is where C++/CUDA extensions build
or are found in the build cache), check its signatures and construct ModelNew with the
reference's seed (the same weights)."""
from __future__ import annotations

import time

from ..verdict import ERROR, REJECT, CompileResult, Flag
from . import guard
from .context import Context, describe_exception, install_build_cache
from .records import Built, Loaded, Watch

_perf_counter = time.perf_counter  # captured before candidate code can replace it


def run(ctx: Context, loaded: Loaded) -> Built | None:
    """The candidate loaded and ModelNew built; None when the verdict is decided."""
    from ...problem import ProblemError, check_signatures, load_candidate
    from .. import check, gpucompare, guards, own_code

    ctx.writer.stage(ctx.verdict, "compile")
    with ctx.timer("compile"):
        recorder = install_build_cache(ctx)
        own = own_code.OwnCode().install()  # after the build cache: it wraps the cached builders
        tracker = guards.CompileTracker().install()
        judged_by = {"problem": loaded.problem.module, "kernelwright.judge.check": check,
                     "kernelwright.judge.gpucompare": gpucompare}  # the comparison's own functions
        watch = Watch(snapshot=guards.IdentitySnapshot.take(guards.guarded_targets(judged_by)),
                      precision_before=guards.precision_state(), dynamo_before=guards.dynamo_frames(),
                      compile_tracker=tracker, own=own)
        static_flags(ctx)
        start = _perf_counter()
        try:
            module = load_candidate(ctx.candidate_path)
            check_signatures(loaded.problem, module.ModelNew, ctx.candidate_path)
        except BaseException as exc:  # noqa: BLE001 - ProblemError, or SystemExit from the candidate
            message = str(exc) if isinstance(exc, ProblemError) else describe_exception(exc, ctx.candidate_path, "import")
            ctx.verdict.compile = compile_result(ctx, recorder, _perf_counter() - start, message)
            ctx.stop(ERROR, f"the candidate does not load: {message}{compile_errors(ctx.verdict.compile, message)}")
            return None
        ctx.verdict.compile = compile_result(ctx, recorder, _perf_counter() - start, None)
        with ctx.on_device(loaded.lock, "shared"):
            try:
                model = loaded.problem.make_model(ctx.config.seed, loaded.device, cls=module.ModelNew)
            except BaseException as exc:  # noqa: BLE001 - candidate code
                ctx.stop(ERROR, describe_exception(exc, ctx.candidate_path, "ModelNew(*get_init_inputs())"))
                return None
            guard.after_call(ctx, watch, "while loading the candidate")
    return Built(loaded=loaded, model=model, watch=watch, recorder=recorder)


def compile_result(ctx: Context, recorder, seconds: float, error: str | None) -> CompileResult:
    from .. import candidate_kinds

    result = None
    if recorder is not None:
        try:
            result = recorder.result()
        except Exception as exc:  # noqa: BLE001
            ctx.notes.append(f"build recorder failed: {exc}")
    if result is None:
        result = CompileResult(ok=error is None, seconds=round(seconds, 3))
    if result.backend in ("", "none"):  # nothing was built ahead of time: say what the source uses
        result.backend = candidate_kinds.backend_of(ctx.candidate_source)
    if error is not None:
        result.ok = False
        result.errors = result.errors or [error]
        result.log = result.log or error
    return result


def compile_errors(result: CompileResult, message: str) -> str:
    """The build's first errors (from the build cache's log), where they add to the message."""
    extra = [e for e in result.errors[:3] if e != message]
    return (" Compiler errors: " + " | ".join(extra)) if extra else ""


def static_flags(ctx: Context) -> None:
    from .. import candidate_kinds

    for finding in candidate_kinds.scan(ctx.candidate_source):
        check = "source_torch_compile" if finding.code == "torch_op" else "source_introspection"
        ctx.flag(Flag(finding.code, REJECT, f"{ctx.candidate_path}, line {finding.line}: uses {finding.what}: "
                      f"{finding.why}", check=check))


def compile_only(ctx: Context) -> None:
    """Phase A of the pool: import the candidate so its extensions land in the shared build cache."""
    from ...problem import ProblemError, load_candidate

    recorder = install_build_cache(ctx)
    start = _perf_counter()
    try:
        load_candidate(ctx.candidate_path)
        ctx.verdict.compile = compile_result(ctx, recorder, _perf_counter() - start, None)
    except BaseException as exc:  # noqa: BLE001
        message = str(exc) if isinstance(exc, ProblemError) else describe_exception(exc, ctx.candidate_path, "import")
        ctx.verdict.compile = compile_result(ctx, recorder, _perf_counter() - start, message)
        ctx.verdict.error = message
