"""After every call of candidate code: monkeypatching and precision switches since the snapshot are
flagged, then undone (`Watch`, installed by stages.compile before the candidate is imported)."""
from __future__ import annotations

from .context import Context
from .records import Watch


def after_call(ctx: Context, watch: Watch, when: str) -> None:
    with ctx.timer("guards"):
        _after_call(ctx, watch, when)


def _after_call(ctx: Context, watch: Watch, when: str) -> None:
    from .. import guards

    changed = watch.snapshot.changes()
    if any(name in guards.DYNAMO_PATCHES for name in changed):
        watch.dynamo_patched = True  # dynamo ran: reported as torch_op, not as the candidate's patching
        changed = [name for name in changed if name not in guards.DYNAMO_PATCHES]
    new = [name for name in changed if name not in watch.patched]
    if new:
        watch.patched.update(new)
        ctx.flag(guards.monkeypatch_flag(new, when))
    if changed:
        watch.snapshot.restore(changed)
    now = guards.precision_state()
    flag = guards.precision_flag(watch.precision_before, now, ctx.config.allow_tf32)
    if flag is not None:
        ctx.flag(flag)
        guards.set_full_precision(ctx.config.allow_tf32)
