"""The rule sets a candidate is judged by, as data: one source for the prompt, the docs and the report.

Each `Rule` is a sentence the model reads plus the ids of the judge checks that enforce it
(`kernelwright.judge.checks.CHECKS`; a test keeps the two in step). A `RuleSet` is the common
rules (correctness, precision by measurement, the anti-hack guards) plus its rules about whose
code does the work:

- `kernelbench` (default): torch, and so cuBLAS/cuDNN, may keep part of the work; the candidate's
  own kernels must take over some of the reference's work, decided from the dispatcher's op record.
- `library`: forward's Python runs no torch compute; the candidate's C++/CUDA extension may call
  ATen and vendor libraries (cuBLAS, cuBLASLt, cuDNN, CUTLASS), whose ATen ops still count as torch work.
- `strict`: every compute op runs in a kernel the candidate wrote; ATen compute and vendor
  libraries called from C++ are detected and rejected.

Standard library only: the judge's GPU side, the agents and the report all read this module.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import precision

DEFAULT = "kernelbench"


@dataclass(frozen=True)
class Rule:
    id: str
    title: str  # a few words, for tables and headers
    text: str  # what the model reads (Markdown, one paragraph; `{tolerances}` is filled in when known)
    checks: tuple[str, ...]  # ids of the judge checks that enforce it (kernelwright.judge.checks)


@dataclass(frozen=True)
class RuleSet:
    name: str
    summary: str  # one line: what is allowed, for prompts, headers and help texts
    rules: tuple[Rule, ...]
    python_torch_work: bool  # forward's Python may run torch compute (counted against the reference's)
    extension_torch_work: bool  # the candidate's C++ may call ATen compute (counted likewise)
    vendor_libraries: bool  # the candidate's C++ may call cuBLAS/cuDNN/CUTLASS & co.

    def check_ids(self) -> set[str]:
        return {check for rule in self.rules for check in rule.checks}

    def rule(self, rule_id: str) -> Rule:
        return next(r for r in self.rules if r.id == rule_id)


# ---------------------------------------------------------------------------------- common rules

INTERFACE = Rule(
    "interface", "same interface",
    "`ModelNew(*get_init_inputs())` and `forward` take the reference's arguments. Both models are built on "
    "the CPU under one seed, then moved with `.to(device)`, so the same `nn` layers created in the same order "
    "get the same weights: keep the reference's layers (`nn.Linear`, `nn.Conv2d`) as weight holders and read "
    "`.weight` / `.bias` in your code. Input-independent weight preparation in `__init__` (a transposed or "
    "packed copy) is allowed: register it as a buffer or parameter so `.to(device)` moves it; the judge never "
    "changes weights after construction and never loads a state dict into `ModelNew` (a non-persistent "
    "buffer is fine).",
    ("signatures",))

CORRECT = Rule(
    "correct-outputs", "correct outputs",
    "Several trials with other seeds, cycling through input variants of the floating-point inputs: the "
    "problem's own `get_inputs()` values, `signed` (mapped onto [-m, m/3], m the largest magnitude), "
    "`wide_pos` (scaled so the largest value is +100), `wide_neg` (the smallest is -100) and `negated`; "
    "integer inputs (indices, targets) keep the problem's values. "
    "Outputs must match: same shapes, a dtype at "
    "least as precise, no NaN/Inf the reference lacks, every element within `|out - ref| <= atol*S + "
    "rtol*|ref|` (S = max(1, RMS of the reference output)), and `||out - ref|| / ||ref||` within its "
    "bound{tolerances}.",
    ("compare_outputs", "compare_elementwise", "compare_rel_l2"))

PRECISION = Rule(
    "precision-by-measurement", "precision by measurement",
    "Only the measured error counts: inside your kernels TF32 or 3xTF32 tensor-core products, fp16/bf16 "
    "pieces and fast-math intrinsics (`__expf`, `tl.exp`) are fine while every trial stays within the bounds. "
    + precision.rule_sentence() + " The verdict reports the margin (measured / allowed).",
    ("compare_elementwise", "compare_rel_l2"))

GLOBAL_SWITCHES = Rule(
    "no-global-switches", "no global precision switches",
    "Never change global torch settings (`allow_tf32`, `set_float32_matmul_precision`, reduced-precision "
    "reduction flags): rejected and undone. The judge sets them itself: TF32 off for cuBLAS and cuDNN "
    "unless the run allows it, so torch's own products and convolutions (the reference's and yours) run in "
    "full float32.",
    ("precision_switches",))

FRESH = Rule(
    "fresh-results", "fresh results",
    "Every call computes from its current inputs: no caching by pointer, shape or call count (the judge "
    "refills the same buffers and calls again); every output element is written (fresh memory is "
    "poisoned); inputs stay unchanged, except those the reference itself writes in place, which must then "
    "hold the reference's values. Timed calls get fresh inputs every call, and a random sample of them is "
    "checked like a trial.",
    ("output_refill", "poisoned_memory", "input_fingerprint", "timed_outputs"))

STREAM = Rule(
    "current-stream", "current stream",
    "All work runs on the current CUDA stream or joins it before `forward` returns.",
    ("side_stream",))

NO_TAMPERING = Rule(
    "no-tampering", "no tampering",
    "No monkeypatching of torch, timers, comparisons or the reference module; no reading the judge's "
    "memory (`gc`, stack frames) or files (your code runs in a process of its own, which holds none of "
    "them). The same work on every call: calls the judge does not record op by op may not run more torch "
    "or library work than the ones it does.",
    ("identity_snapshot", "source_introspection", "verdict_token", "trusted_files", "observed_work"))

OWN_KERNEL = Rule(
    "own-kernel", "an own kernel runs",
    "`forward` launches at least one kernel of yours: a `@triton.jit` kernel or a function of an extension "
    "you build with `torch.utils.cpp_extension.load_inline` / `load`. `torch.compile` / dynamo / inductor "
    "are rejected.",
    ("own_kernel_launch", "source_torch_compile", "dynamo_use"))

TIMING = Rule(
    "timing", "timing",
    "Only a candidate passing every rule is timed (median, L2 flushed) against PyTorch eager and "
    "`torch.compile` (against the reference's own kernels where the reference is a kernel); faster is better; a time below the speed-of-light floor is flagged.",
    ("speed_of_light_floor",))

# ---------------------------------------------------------------------------- whose code does the work

_COUNTING = (
    "The judge records at the dispatcher the torch ops of the reference's `forward` and of yours (from Python "
    "or from your C++ via `at::`), counted per kind (matmul, conv, softmax, norm, pool, reduction, "
    "elementwise, ...; views, allocation, fills, copies and concatenation are free; ops inside your Triton "
    "launches are not torch's). One op is one count of its kind: `linear`/`addmm` (bias included), `mm`, "
    "`bmm` and `matmul` are each one matmul; a transpose `W.t()` is a free view.")

TORCH_WORK_REDUCED = Rule(
    "torch-work-reduced", "torch keeps only part of the work",
    "PyTorch (so cuBLAS/cuDNN) may keep part of the work; your kernels must take over some of it. "
    + _COUNTING + " Pass: for every kind no more torch ops than the reference, and fewer for at least one. "
    "E.g. `nn.Linear` + ReLU as `torch.mm(x, W.t())` plus your kernel fusing bias and ReLU passes; a bare "
    "`nn.Linear` as `x @ W.t()` plus your bias kernel does not (the product is still torch's); all work in "
    "torch plus a copy kernel does not.",
    ("torch_work",))

PYTHON_GLUE_ONLY = Rule(
    "python-glue-only", "no torch compute in forward's Python",
    "Outside your kernels and extension calls, `forward` runs only free torch ops (views, allocation, fills, "
    "copies, concatenation): no `torch.matmul`, `@`, `F.conv2d`, `x + y`, reductions, activations or `nn` "
    "layer calls.",
    ("python_torch_ops",))

LIBRARIES_IN_EXTENSION = Rule(
    "libraries-in-extension", "vendor libraries from C++",
    "Your C++/CUDA extension may call cuBLAS, cuBLASLt, cuDNN, CUTLASS and ATen (`at::matmul`); its ATen "
    "ops count as torch work above, so a kernel of yours must still replace part of the reference's work.",
    ("torch_work",))

NO_VENDOR = Rule(
    "no-vendor-libraries", "every compute op in your own kernels",
    "Every compute op runs in a kernel you wrote: your C++ may allocate (`torch::empty`) and take views, but "
    "not call ATen compute (`at::matmul`) or vendor libraries (cuBLAS, cuBLASLt, cuDNN, cuSPARSE, cuSOLVER, "
    "cuFFT, CUTLASS/CuTe); the judge checks ops recorded in your extension's calls and the built library's "
    "linked libraries and symbols.",
    ("extension_torch_ops", "extension_libraries"))

COMMON_BEFORE = (INTERFACE, CORRECT, PRECISION, GLOBAL_SWITCHES)
COMMON_AFTER = (OWN_KERNEL, FRESH, STREAM, NO_TAMPERING, TIMING)

RULE_SETS: dict[str, RuleSet] = {
    "kernelbench": RuleSet(
        "kernelbench",
        "KernelBench-compatible: torch (cuBLAS/cuDNN) may keep part of the work, your kernels replace some",
        COMMON_BEFORE + (TORCH_WORK_REDUCED,) + COMMON_AFTER,
        python_torch_work=True, extension_torch_work=True, vendor_libraries=True),
    "library": RuleSet(
        "library",
        "no torch compute in forward's Python; your C++ may call cuBLAS, cuDNN, CUTLASS and ATen",
        COMMON_BEFORE + (PYTHON_GLUE_ONLY, TORCH_WORK_REDUCED, LIBRARIES_IN_EXTENSION) + COMMON_AFTER,
        python_torch_work=False, extension_torch_work=True, vendor_libraries=True),
    "strict": RuleSet(
        "strict",
        "every compute op in kernels you wrote: no torch compute, no ATen or vendor libraries from C++",
        COMMON_BEFORE + (PYTHON_GLUE_ONLY, NO_VENDOR) + COMMON_AFTER,
        python_torch_work=False, extension_torch_work=False, vendor_libraries=False),
}
NAMES = tuple(RULE_SETS)


class UnknownRuleSet(ValueError):
    """A rule set name that is not one of NAMES."""


def get(name: str | None) -> RuleSet:
    """The rule set called `name` (None: the default)."""
    key = DEFAULT if name is None else str(name).strip().lower()
    if key not in RULE_SETS:
        raise UnknownRuleSet(f"unknown rule set {name!r}; choose one of {', '.join(NAMES)}")
    return RULE_SETS[key]


def all_rules() -> list[Rule]:
    """Every rule of every set, once each, in first-use order."""
    seen: dict[str, Rule] = {}
    for rule_set in RULE_SETS.values():
        for rule in rule_set.rules:
            seen.setdefault(rule.id, rule)
    return list(seen.values())


# run settings written before rule sets existed carry `torch_op_policy`; "reject" was today's strict rule
LEGACY_POLICY = {"reject": "strict", "warn": "kernelbench", "allow": "kernelbench"}


def from_legacy_policy(policy: str) -> str:
    """The rule set a stored `torch_op_policy` maps to (see docs/judge.md, "Rule sets")."""
    if policy not in LEGACY_POLICY:
        raise UnknownRuleSet(f"unknown torch_op_policy {policy!r}; rule sets replace it: {', '.join(NAMES)}")
    return LEGACY_POLICY[policy]
