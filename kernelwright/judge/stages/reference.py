"""Stage 1's reference outputs: read from the reference store (`refstore`, through the supervisor)
or computed, then offered to the store; both before any candidate code exists in the process.

The order is the defence: the worker asks its supervisor for the entry (`references`), which
verifies it against its digests; on a miss it computes every trial's reference outputs as always,
writes them to its own work folder and asks the supervisor to publish them (`store_references`).
The supervisor accepts both requests only before the baseline seal that ends stage 1, so no
process that has run candidate code can add to, or ask of, the store. Without a supervisor (a
worker run by hand) the references are computed and not stored.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .context import Context, read_text

# share of the GPU's free memory the reference outputs of all trials may keep on the device
REFERENCE_MEMORY_SHARE = 0.25
STAGED = Path("reference-stage") / "cases.pt"  # in the worker's work folder (its cwd)
_perf_counter = time.perf_counter


def lookup(ctx: Context, problem, device: str) -> tuple[dict[str, Any] | None, Any]:
    """(the store's reply, the loaded `refcases.References` on a verified hit, else None)."""
    from .. import guards, refcases, service

    if not service.available() or ctx.config.reference_cache_entry_bytes <= 0:
        return None, None
    env = ctx.modules.get("env")
    try:
        name = env.device_name(device) if env is not None else ""
        fields = refcases.key_fields(read_text(ctx.problem_path), problem, ctx.config, device, name,
                                     guards.precision_state())
        reply = service.call("references", fields=fields)
    except Exception as exc:  # noqa: BLE001 - no store then: computed as without one
        ctx.notes.append(f"reference store unavailable: {exc}")
        return None, None
    if not reply.get("hit"):
        return reply, None
    try:
        return reply, refcases.load(Path(reply["path"]), device, reference_budget(device))
    except Exception as exc:  # noqa: BLE001 - evicted meanwhile, or unreadable: compute instead
        reply.update(hit=False, why=f"entry unreadable: {type(exc).__name__}: {exc}")
        return reply, None


def store(ctx: Context, reply: dict[str, Any] | None, refs, compute_s: float) -> dict[str, Any] | None:
    """Offer freshly computed references (computed in `compute_s` seconds) to the store; what
    happened, for the verdict."""
    from .. import refcases, service

    if reply is None:
        return None
    record = {"hit": False, "key": reply.get("key", ""), "why": reply.get("why", "")}
    least = ctx.config.reference_cache_min_compute_s
    if compute_s < least:
        record["stored"] = False
        record["note"] = (f"not stored: computed in {compute_s:.2f} s, under reference_cache_min_compute_s "
                          f"({least:g} s): cheaper to compute again than to store")
        return record
    size = refcases.stored_bytes(refs)
    cap = ctx.config.reference_cache_entry_bytes
    if size > cap:
        record["stored"] = False
        record["note"] = (f"not stored: {size / 2**30:.2f} GiB of reference tensors is above the cap of "
                          f"{cap / 2**30:.2f} GiB (reference_cache_entry_bytes); every candidate computes them")
        return record
    started = _perf_counter()
    try:
        refcases.save(refs, STAGED.absolute())
        answer = service.call("store_references", path=str(STAGED.absolute()))
        record.update(stored=bool(answer.get("stored")), bytes=answer.get("bytes"))
        if answer.get("why"):
            record["note"] = answer["why"]
    except Exception as exc:  # noqa: BLE001 - the candidate is judged all the same
        record.update(stored=False, note=f"not stored: {type(exc).__name__}: {exc}")
    finally:
        STAGED.unlink(missing_ok=True)
    record["store_s"] = round(_perf_counter() - started, 3)
    return record


def hit_record(reply: dict[str, Any]) -> dict[str, Any]:
    return {"hit": True, "key": reply.get("key", ""), "verify_s": reply.get("verify_s")}


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
