"""Stage 2, compile: the candidate's source is scanned here (it is text to this process), then the
runner is asked to import it (where C++/CUDA extensions build, through the supervisor's trusted
builder, or are found in the build cache) and check its signatures, and then, holding the device,
to build ModelNew with the reference's seed (the same weights). Nothing of the candidate runs in
this process."""
from __future__ import annotations

from ... import candidate_kinds
from ...checks import check_flag
from ...request import default_cache_dir
from ...verdict import ERROR, REJECT, CompileResult, dataclass_from
from ..link import RunnerGone
from .context import Context
from .records import Built, Loaded


def run(ctx: Context, loaded: Loaded) -> Built | None:
    """The candidate loaded and ModelNew built in the runner; None when the verdict is decided."""
    ctx.writer.stage(ctx.verdict, "compile")
    with ctx.timer("compile"):
        static_flags(ctx)
        link = ctx.link
        try:
            reply = link.load(**load_fields(ctx, loaded, ctx.runner.candidate_path))
        except RunnerGone as exc:
            ctx.verdict.compile = CompileResult(ok=False, log=str(exc), errors=[str(exc)])
            ctx.stop(ERROR, f"the candidate does not load: {ctx.runner.death(str(exc))}")
            return None
        ctx.verdict.compile = compile_result(ctx, reply.get("compile"))
        if not reply.get("ok"):
            message = str(reply.get("error") or "the candidate did not load")
            ctx.verdict.compile.ok = False
            ctx.verdict.compile.errors = ctx.verdict.compile.errors or [message]
            ctx.verdict.compile.log = ctx.verdict.compile.log or message
            ctx.stop(ERROR, f"the candidate does not load: {message}{compile_errors(ctx.verdict.compile, message)}")
            return None
        ctx.runner.loaded()
        with ctx.on_device(loaded.lock, "shared"):
            try:
                reply = link.build()
            except RunnerGone as exc:
                ctx.stop(ERROR, ctx.runner.death(str(exc)))
                return None
        if not reply.get("ok"):
            ctx.stop(ERROR, str(reply.get("error")))
            return None
    return Built(loaded=loaded, link=link)


def load_fields(ctx: Context, loaded: Loaded, candidate_path) -> dict:
    """What the runner is told to load: the problem with its sizes, the candidate file (its copy in
    the runner's folder), the reference's seed, the device, the build cache, the precision rules."""
    return {"problem_path": str(ctx.runner.problem_path), "candidate_path": str(candidate_path),
            "overrides": dict(loaded.problem.overrides), "seed": ctx.config.seed, "device": loaded.device,
            "cache_dir": str(cache_dir(ctx)), "allow_tf32": ctx.config.allow_tf32,
            "backward": backward_settings(loaded)}


def cache_dir(ctx: Context):
    return default_cache_dir(ctx.config)


def backward_settings(loaded: Loaded) -> dict | None:
    """What the runner needs to run forward + backward (None: forward only)."""
    if loaded.backward is None:
        return None
    grad_inputs = loaded.backward.grad_inputs
    return {"grad_inputs": list(grad_inputs) if grad_inputs is not None else None}


def compile_result(ctx: Context, record: dict | None) -> CompileResult:
    try:
        result = dataclass_from(CompileResult, dict(record or {}))
    except (TypeError, ValueError):
        result = CompileResult(ok=False, log="the runner's compile record was malformed")
    if result.backend in ("", "none"):  # nothing was built ahead of time: say what the source uses
        result.backend = candidate_kinds.backend_of(ctx.candidate_source)
    return result


def compile_errors(result: CompileResult, message: str) -> str:
    """The build's first errors (from the build cache's log), where they add to the message."""
    extra = [e for e in result.errors[:3] if e != message]
    return (" Compiler errors: " + " | ".join(extra)) if extra else ""


def static_flags(ctx: Context) -> None:
    for finding in candidate_kinds.scan(ctx.candidate_source):
        ctx.flag(check_flag(finding.check, REJECT,
                            f"{ctx.candidate_path}, line {finding.line}: uses {finding.what}: "
                            f"{finding.why}"))


def compile_only(ctx: Context) -> None:
    """Phase A of the pool: the runner imports the candidate so its extensions land in the shared
    build cache (no device work, no problem needed beyond its path)."""
    try:
        reply = ctx.link.load(problem_path=str(ctx.runner.problem_path), candidate_path=str(ctx.runner.candidate_path),
                              overrides={}, seed=ctx.config.seed, device="cpu", cache_dir=str(cache_dir(ctx)),
                              allow_tf32=ctx.config.allow_tf32, backward=None)
    except RunnerGone as exc:
        ctx.verdict.compile = CompileResult(ok=False, log=str(exc), errors=[str(exc)])
        ctx.verdict.error = str(exc)
        return
    ctx.verdict.compile = compile_result(ctx, reply.get("compile"))
    if not reply.get("ok"):
        ctx.verdict.compile.ok = False
        ctx.verdict.error = str(reply.get("error"))
