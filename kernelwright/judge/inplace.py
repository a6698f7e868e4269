"""References that write into their inputs (a rotary embedding applied to q and k in place).

Writing into an input is a hack when the reference does not do it (the candidate could hide its
result there), and it is the contract when the reference does: production kernels update the
KV cache, the residual stream or q/k in place, and a caller relies on it. So the judge records,
per trial, which inputs the reference wrote and their values afterwards (`TrialCase.ref_inputs`);
a candidate must leave those inputs equal to the reference's (under the output tolerances), and
may still write no other input (`unexpected_writes`, flagged `input_mutation`).
"""
from __future__ import annotations

from .check import Comparison, compare_tensor


def unexpected_writes(mutated: list[int], reference_writes: list[int]) -> list[int]:
    """Inputs the candidate wrote that the reference never writes."""
    allowed = set(reference_writes)
    return [i for i in mutated if i not in allowed]


def compare_written(args: list, case, config, device: str) -> Comparison | None:
    """The inputs the reference wrote in this trial against the candidate's, after its call;
    None when the reference wrote none. The first difference explains the failure."""
    if not case.ref_inputs:
        return None
    worst = Comparison(ok=True)
    for index, expected in sorted(case.ref_inputs.items()):
        found = compare_tensor(args[index], expected, config, device, index)
        label = f"input {index} (the reference updates it in place)"
        if not found.ok:
            found.message = found.message.replace(f"output {index}", label, 1)
            return found
        worst = _widest(worst, found)
    return worst


def _widest(a: Comparison, b: Comparison) -> Comparison:
    for name in ("max_abs_err", "max_rel_err", "rel_l2_err"):
        values = [v for v in (getattr(a, name), getattr(b, name)) if v is not None]
        setattr(a, name, max(values) if values else None)
    return a


def merge_into(result, written: Comparison | None) -> None:
    """Fold the in-place comparison into a passing TrialResult (a failure names the input)."""
    if written is None or not result.ok:
        return
    if not written.ok:
        result.ok, result.message = False, written.message
        result.shape_ok &= written.shape_ok
        result.dtype_ok &= written.dtype_ok
        result.nonfinite |= written.nonfinite
    for name in ("max_abs_err", "max_rel_err", "rel_l2_err"):
        value = getattr(written, name)
        if value is not None:
            setattr(result, name, max(value, getattr(result, name) or 0.0))
