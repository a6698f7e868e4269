"""Stage 1's reference outputs: read from the reference store (`refstore`, through the supervisor)
or computed, then offered to the store; both before any candidate code exists in the process.

The order is the defence: the worker asks its supervisor for the entry (`references`), which
verifies it against its digests; on a miss it computes every trial's reference outputs as always,
writes them to its own work folder and asks the supervisor to publish them (`store_references`).
Only what touches the device runs while the worker holds it shared: placing a hit's outputs there,
computing them, and copying them back for the store; the supervisor's lookup, mapping the entry's
file, and writing and publishing an entry do not hold it up for a worker waiting to time.
The supervisor accepts both requests only before the baseline seal that ends stage 1, so no
process that has run candidate code can add to, or ask of, the store. Without a supervisor (a
worker run by hand) the references are computed and not stored.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ... import guards, refcases, service
from ...check import DeviceRoom
from .context import Context, read_text

STAGED = Path("reference-stage") / "cases.pt"  # in the worker's work folder (its cwd)
_perf_counter = time.perf_counter


def lookup(ctx: Context, problem, device: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the store's reply, the entry's payload `read` on the CPU on a verified hit, else None). No
    device work: runs before the worker holds the device."""
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
        return reply, refcases.read(Path(reply["path"]))
    except Exception as exc:  # noqa: BLE001 - evicted meanwhile, or unreadable: compute instead
        return unreadable(reply, exc), None


def place(ctx: Context, reply: dict[str, Any] | None, entry: dict[str, Any] | None, device: str, room):
    """A hit's References on the device within `room` (a `check.DeviceRoom`; under the hold), or
    None: then they are computed."""
    if reply is None or entry is None:
        return None
    try:
        return refcases.place(entry, device, room)
    except Exception as exc:  # noqa: BLE001 - a malformed entry: compute instead
        unreadable(reply, exc)
        return None


def unreadable(reply: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    reply.update(hit=False, why=f"entry unreadable: {type(exc).__name__}: {exc}")
    return reply


@dataclass
class Staged:
    """Freshly computed references on their way to the store: the payload (CPU copies, made under
    the device's hold) or why they are not offered."""

    record: dict[str, Any]
    payload: dict[str, Any] | None = None


def stage(ctx: Context, reply: dict[str, Any] | None, refs, compute_s: float) -> Staged | None:
    """Whether freshly computed references (in `compute_s` seconds) go to the store; their CPU copies
    if so. Under the hold (the copies read the device); `store` writes them after it."""
    if reply is None:
        return None
    record = {"hit": False, "key": reply.get("key", ""), "why": reply.get("why", "")}
    least, again = ctx.config.reference_cache_min_compute_s, int(reply.get("missed_before") or 0)
    if compute_s < least and not again:
        record["stored"] = False
        record["note"] = (f"not stored: computed in {compute_s:.2f} s, under reference_cache_min_compute_s "
                          f"({least:g} s): cheaper to compute again than to store, unless they are asked for "
                          "again")
        return Staged(record)
    if compute_s < least:
        record["note"] = f"stored although computed in {compute_s:.2f} s: {again} evaluation(s) computed them before"
    size = refcases.stored_bytes(refs)
    cap = ctx.config.reference_cache_entry_bytes
    if size > cap:
        record["stored"] = False
        record["note"] = (f"not stored: {size / 2**30:.2f} GiB of reference tensors is above the cap of "
                          f"{cap / 2**30:.2f} GiB (reference_cache_entry_bytes); every candidate computes them")
        return Staged(record)
    return Staged(record, refcases.payload(refs))


def store(ctx: Context, staged: Staged | None) -> dict[str, Any] | None:
    """Write staged references and ask the supervisor to publish them (no device work: after the
    hold); what happened, for the verdict."""
    if staged is None or staged.payload is None:
        return staged.record if staged is not None else None
    record, started = staged.record, _perf_counter()
    try:
        refcases.save(staged.payload, STAGED.absolute())
        answer = service.call("store_references", path=str(STAGED.absolute()))
        record.update(stored=bool(answer.get("stored")), bytes=answer.get("bytes"))
        if answer.get("why"):
            record["note"] = answer["why"]
    except Exception as exc:  # noqa: BLE001 - the candidate is judged all the same
        record.update(stored=False, note=f"not stored: {type(exc).__name__}: {exc}")
    finally:
        STAGED.unlink(missing_ok=True)
        staged.payload = None
    record["store_s"] = round(_perf_counter() - started, 3)
    return record


def hit_record(reply: dict[str, Any]) -> dict[str, Any]:
    return {"hit": True, "key": reply.get("key", ""), "verify_s": reply.get("verify_s")}


def release_cached(device: str) -> None:
    """Give the driver back what the caching allocator holds but no tensor uses (the reference's
    intermediates, outputs copied to the host), under the hold that computed them: memory the judge
    only reserved must not be the room a candidate runs out of (an H200 run, 2026-11-28: the
    checker held 14 GiB while the candidate ran out of memory). Kept references stay."""
    if not device.startswith("cuda"):
        return
    try:
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001 - a broken context shows at the next device call
        pass


def open_context(device: str) -> None:
    """Create this process's CUDA context now, before the device's hold: it is driver work, 1.2 s a
    worker beside 11 others on the H100 (docs/benchmarks.md), that used to run inside the hold at
    the first query of free memory. Nothing off a GPU; a failure shows at the next device call."""
    if not device.startswith("cuda"):
        return
    try:
        torch.cuda.mem_get_info(torch.device(device))
    except Exception:  # noqa: BLE001 - reported where the device is used
        pass


def device_room(device: str, config):
    """What the reference outputs may keep on the GPU (a `check.DeviceRoom`: nothing off a GPU)."""
    if not device.startswith("cuda"):
        return DeviceRoom()
    try:
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    except Exception:  # noqa: BLE001 - unknown: keep them on the CPU
        return DeviceRoom()
    return DeviceRoom(free=int(free), share=config.reference_device_share)
