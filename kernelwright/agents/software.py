"""What the target's Triton can do, for the target section of every prompt.

The target records the versions the judge runs (`Target.software`: torch, triton, cuda, nvcc,
driver). Whether `tl.dot` takes `input_precision="tf32x3"` or `tl.make_tensor_descriptor` exists
depends on the Triton version, and a model that guesses wrong writes code that does not compile.
Each entry below names the first release that has the feature and where that is recorded; a
feature is stated as available or missing only when the version is known. A target that carries
the features it probed on the device (`Target.triton_features`, when the judge records them) is
believed over this table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Feature:
    since: tuple[int, int]  # first Triton release (major, minor) that has it
    text: str  # what the prompt says, written so it reads after "available:" / "missing:"
    source: str  # where the first release is recorded


TRITON_FEATURES = (
    Feature((3, 0), "`tl.dot(..., input_precision=\"tf32x3\")` (also `\"ieee\"`, `\"tf32\"`)",
            "triton-lang/triton PR #3234 (3xTF32, merged 2024-03) and #3498, released in 3.0.0"),
    Feature((3, 4), "`tl.make_tensor_descriptor` (TMA descriptors made in the kernel; call `triton.set_allocator` "
                    "first)",
            "Triton 3.3.0 added `_experimental_make_tensor_descriptor`, 3.4.0 renamed it `make_tensor_descriptor`"),
)


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """(major, minor) of a version string such as "3.6.0" or "3.4.0+git1234"; None when unreadable."""
    match = re.match(r"\s*(\d+)\.(\d+)", str(text or ""))
    return (int(match.group(1)), int(match.group(2))) if match else None


def triton_support(target: Any) -> dict[str, list[str]]:
    """{"available": [...], "missing": [...]} for the target's Triton ({} when its version is unknown).
    Features the target probed on the device (`triton_features`: name -> bool) replace the table."""
    probed = getattr(target, "triton_features", None) or {}
    if probed:
        return {"available": [f"`{name}`" for name, ok in probed.items() if ok],
                "missing": [f"`{name}`" for name, ok in probed.items() if not ok]}
    version = version_tuple((getattr(target, "software", None) or {}).get("triton"))
    if version is None:
        return {}
    return {"available": [f.text for f in TRITON_FEATURES if version >= f.since],
            "missing": [f.text for f in TRITON_FEATURES if version < f.since]}
