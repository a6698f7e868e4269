"""The seed's own check before the file is kept: nothing the judge's candidate scan rejects, the same
weights as the reference under one seed, and the same outputs on fresh inputs. A quick check, not a
verdict (`kernelwright judge` gives that): it catches an export that went wrong at once, with the
reason, instead of leaving a broken file."""
from __future__ import annotations

from pathlib import Path

import torch

from ..judge.candidate_kinds import scan
from ..problem import ProblemError, load_candidate
from .types import SeedError

TOLERANCE = 1e-3  # looser than the judge's: this check looks for a broken export, not for precision


def check_seed(problem, path: Path, device: str, seed: int = 0) -> None:
    source = path.read_text()
    found = scan(source)
    if found:
        raise SeedError("the written seed holds what the judge rejects: " +
                        "; ".join(f"line {f.line}: {f.what} ({f.why})" for f in found))
    try:
        module = load_candidate(path)
        reference = problem.make_model(seed, device=device)
        candidate = problem.make_model(seed, device=device, cls=module.ModelNew)
    except ProblemError as exc:
        raise SeedError(f"the written seed does not load: {exc}") from exc
    _same_weights(reference, candidate)
    inputs = problem.make_inputs(seed + 1, "given", device=device)
    with torch.no_grad():
        expected = reference(*inputs)
        try:
            got = candidate(*inputs)
        except Exception as exc:  # noqa: BLE001 -- any failure of the written file is the reason to report
            raise SeedError(f"the written seed fails when called: {type(exc).__name__}: {exc}") from exc
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    got = [got] if isinstance(got, torch.Tensor) else list(got)
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        _close(index, want, have)


def _same_weights(reference, candidate) -> None:
    ours = candidate.state_dict()
    for name, value in reference.state_dict().items():
        if name not in ours or not torch.equal(ours[name], value):
            raise SeedError(f"the written seed's ModelNew does not hold the reference's {name} under the same seed")


def _close(index: int, want, have) -> None:
    if have.shape != want.shape or have.dtype != want.dtype:
        raise SeedError(f"output {index}: the seed gives {tuple(have.shape)} {have.dtype}, the reference "
                        f"{tuple(want.shape)} {want.dtype}")
    want, have = want.double(), have.double()
    scale = max(1.0, float(want.pow(2).mean().sqrt())) if want.numel() else 1.0
    if not torch.allclose(have, want, rtol=TOLERANCE, atol=TOLERANCE * scale, equal_nan=True):
        err = float((have - want).abs().max())
        raise SeedError(f"output {index}: the seed's values differ from the reference's (max abs error {err:.3g})")
