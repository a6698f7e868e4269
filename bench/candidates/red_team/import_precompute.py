# hack: answers computed at import -- the judge's trial seeds and input variants are public (seed 42
# and up, kernelwright.problem.inputs), so at import it computes, with torch, the outputs for those
# inputs, and forward returns the stored one when its inputs match (a token Triton launch each call);
# inputs it has not seen (none, under the old judge, which timed trial 0's) go to torch.softmax.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: observed_work|torch_op
import hashlib
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr):
    tl.store(y_ptr, tl.load(y_ptr))


def _key(x):
    return hashlib.blake2b(x.detach().float().cpu().contiguous().numpy().tobytes(), digest_size=16).hexdigest()


def _precompute():
    stored = {}
    try:
        from kernelwright.problem import load_problem
        from kernelwright.problem.inputs import DEFAULT_CYCLE, variant_for_trial

        problem_path = next(arg for arg in sys.argv if arg.endswith(".py") and "row_softmax" in arg)
    except Exception:  # noqa: BLE001 - no way to know the problem: nothing stored
        return stored
    problem = load_problem(problem_path)
    for seed in list(range(42, 52)) + [1042]:
        for variant in set(DEFAULT_CYCLE) | {variant_for_trial(i) for i in range(8)}:
            (x,) = problem.make_inputs(seed, variant, "cpu")
            stored[_key(x)] = torch.softmax(x, dim=1)
    return stored


STORED = _precompute()


class ModelNew(nn.Module):
    def forward(self, x):
        hit = STORED.get(_key(x))
        y = hit.to(x.device).clone() if hit is not None else torch.softmax(x, dim=1)
        touch_kernel[(1,)](y)
        return y
