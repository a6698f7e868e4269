"""Precision facts for float32 matrix products, from one file: what the rules, the floor's text, the
backend guide and the skills say about TF32, 3xTF32, 3xBF16 and fp16 splits.

`precision_facts.json` beside this module is written by `bench/precision_facts.py`: `--emulate` on a
CPU (operands rounded as each scheme does, products summed exactly, compared through the judge's own
comparison on its input variants), `--gpu` on the target (Triton kernels, both accumulation patterns).
Its `source` says which ("emulated" or "measured on <device>"), and every text rendered here says so.
ACCUMULATION records what was observed on the H100 about accumulating split products over long K,
with where it was observed. Standard library only, like the rest of `rules`.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

FACTS_FILE = Path(__file__).with_name("precision_facts.json")

# How split products are accumulated over K: the pattern that keeps their accuracy, and what the
# other pattern did where it was tried.
ACCUMULATION = (
    "Accumulate a split product tile by tile: each K tile's two or three partial products from zero, "
    "that tile's sum added to the float32 running sum with an ordinary add. Adding every product of every "
    "tile into one running accumulator failed the float32 check at a relative L2 error of 3e-5 over "
    "K = 8192 on the H100 (a 3xTF32 GEMM, issue 31's exchange run)."
)


@dataclass(frozen=True)
class Scheme:
    name: str  # "tf32x3"
    title: str  # "3xTF32: TF32 high and low halves, three products"
    products: int
    rate: str  # "a third of the TF32 rate"
    fits_float32: bool
    rel_l2: float  # worst relative L2 error over K and the judge's input variants
    margin: float  # worst measured / allowed error (1.0 is the bound)


@functools.lru_cache(maxsize=1)
def facts() -> dict:
    """The facts file as written by bench/precision_facts.py."""
    return json.loads(FACTS_FILE.read_text(encoding="utf-8"))


def schemes() -> dict[str, Scheme]:
    """Each scheme's worst case over K (and, measured on a GPU, its tile-by-tile accumulation)."""
    out: dict[str, Scheme] = {}
    for item in facts()["schemes"]:
        if item.get("accumulation", "per_tile") != "per_tile" or item["name"] in out:
            continue
        values = list(item["by_k"].values())
        out[item["name"]] = Scheme(item["name"], item["title"], int(item["products"]), item["rate"],
                                   bool(item["fits_float32"]), max(v["rel_l2"] for v in values),
                                   max(v["margin"] for v in values))
    return out


def source() -> str:
    """"emulated on a CPU (exact accumulation)" or "measured on <device>"."""
    found = facts().get("source", "")
    return "emulated on a CPU with exact accumulation" if found == "emulated" else found


def _ks() -> str:
    first = facts()["schemes"][0]["by_k"]
    return ", ".join(first)


def prompt_section() -> str:
    """The block of the system prompt for problems with float32 matrix products."""
    rows = [f"| {s.title} | {s.rate} | {'passes' if s.fits_float32 else 'fails'} | {s.rel_l2:.1g} | {s.margin:.2g} |"
            for s in schemes().values()]
    return "\n".join([
        "# Precision of float32 matrix products",
        "",
        f"How each way of computing a float32 product fares against the judge's float32 bounds ({source()}, "
        f"K = {_ks()}, the judge's input variants; worst case shown):",
        "",
        "| scheme | rate | float32 check | relative L2 error | margin (measured / allowed) |",
        "|---|---|---|---|---|",
        *rows,
        "",
        ACCUMULATION,
    ]) + "\n"


def floor_phrase(kind: str) -> str:
    """How the floor's matrix rate computes a float32 product, in the floor's sentence ('' for the
    rates of a reference's own dtype)."""
    scheme = schemes().get(kind)
    if scheme is None or not scheme.fits_float32:
        return ""
    return (f"{scheme.title.split(':')[0]} on the tensor cores at {scheme.rate}: the fastest rate within the float32 "
            f"bounds the floor counts (relative L2 error {scheme.rel_l2:.1g}, {source()})")


def rule_sentence() -> str:
    """The precision rule's numbers (rules/sets.py): how single-pass TF32 and the 3xTF32 split fare."""
    found = schemes()
    tf32, split = found.get("tf32"), found.get("tf32x3")
    if tf32 is None or split is None:
        return "The measured error alone decides."
    return (f"Single-pass TF32 on float32 operands fails on signed inputs (relative L2 error ~{_sci(tf32.rel_l2)}, "
            f"{tf32.margin:.2g}x the bound); a 3xTF32 split (Triton `input_precision=\"tf32x3\"`) passes "
            f"(~{_sci(split.rel_l2)}; {source()}, the table in the prompt).")


def _sci(value: float) -> str:
    """3e-4, not 0.0003 or 3e-04."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"
