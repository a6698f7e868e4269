"""Every check the judge runs, by id: the other half of the rule sets (`kernelwright.rules`).

A rule the model reads names the checks that enforce it; each check here names the flag it raises
(None where a failed check fails a trial or the load instead) and the function that implements it.
`tests/rules/test_rules_and_checks.py` fails when a stated rule has no registered check, a check
serves no stated rule, or an implementing function does not exist.
"""
from __future__ import annotations

from dataclasses import dataclass

from .verdict import Flag


@dataclass(frozen=True)
class Check:
    id: str
    flag: str | None  # flag code raised (None: a failed trial, or an error verdict)
    implemented_by: str  # "module:function" of the judge
    what: str


CHECKS: dict[str, Check] = {c.id: c for c in (
    Check("signatures", None, "kernelwright.problem.loader:check_signatures",
          "ModelNew's constructor and forward take the reference's arguments"),
    Check("compare_outputs", None, "kernelwright.judge.check:compare_tensor",
          "plain tensors of the reference's shape, a dtype at least as precise, the reference's NaN/Inf only"),
    Check("compare_elementwise", None, "kernelwright.judge.check:compare_tensor",
          "every element within atol*S + rtol*|ref|; the worst ratio is the elementwise margin"),
    Check("compare_rel_l2", None, "kernelwright.judge.check:compare_tensor",
          "||out - ref|| / ||ref|| within its bound; the ratio is the rel-L2 margin"),
    Check("precision_switches", "precision", "kernelwright.judge.guards:precision_flag",
          "global precision switches read after loading and after every call"),
    Check("output_refill", "output_cache", "kernelwright.judge.checker.stages.check:guard_output_cache",
          "trial 0's input buffers refilled in place: the output must follow"),
    Check("timed_outputs", "timed_mismatch", "kernelwright.judge.checker.timed_calls:TimedCalls",
          "every timed call on fresh inputs; a random sample of them compared with the reference"),
    Check("poisoned_memory", "uninitialized_output", "kernelwright.judge.guards:poison_allocator",
          "fresh memory holds poison bytes; elements still holding them were never written"),
    Check("input_fingerprint", "input_mutation", "kernelwright.judge.check:fingerprint",
          "inputs compared before and after every call"),
    Check("side_stream", "side_stream", "kernelwright.judge.checker.stages.check:side_stream_check",
          "outputs copied when the call's stream is done; a wrong copy that is right once the runner has "
          "drained its device work is work that escaped the stream; so is a timed call whose wall clock to a "
          "device-wide sync exceeds its events (timing.side_stream_flag)"),
    Check("identity_snapshot", "monkeypatch", "kernelwright.judge.guards:IdentitySnapshot",
          "identities of guarded functions compared after loading and after every call"),
    Check("source_introspection", "introspection", "kernelwright.judge.candidate_kinds:scan",
          "gc / stack-frame access found in the candidate's syntax tree"),
    Check("verdict_token", "tampering", "kernelwright.judge.api:read_result",
          "a verdict file without the checker's secret token is refused"),
    Check("trusted_files", "tampering", "kernelwright.judge.api:check_trusted_files",
          "the judge's package and cache records compared before and after a candidate ran unconfined"),
    Check("observed_work", "observed_work", "kernelwright.judge.work:observed_work_flag",
          "calls not recorded op by op run no more torch or library work per call than the recorded ones "
          "(the runner's profiler: kernels of every thread on a GPU, ATen ops of every thread on a CPU)"),
    Check("source_torch_compile", "torch_op", "kernelwright.judge.candidate_kinds:scan",
          "torch.compile / dynamo / inductor named in the candidate's syntax tree"),
    Check("dynamo_use", "torch_op", "kernelwright.judge.guards:dynamo_flag",
          "calls of torch.compile, dynamo's compiled frames and its patches of nn.Module"),
    Check("own_kernel_launch", "no_own_kernel", "kernelwright.judge.work:own_kernel_flag",
          "the recorded forward launched a Triton kernel or called the candidate's compiled extension"),
    Check("torch_work", "torch_op", "kernelwright.judge.work:torch_work_flag",
          "torch ops per kind (Python and extension) no more than the reference's, fewer for one kind"),
    Check("python_torch_ops", "torch_op", "kernelwright.judge.work:python_work_flag",
          "no torch compute recorded outside Triton launches and extension calls"),
    Check("extension_torch_ops", "torch_op", "kernelwright.judge.work:extension_work_flag",
          "no ATen compute recorded inside the candidate's extension calls or linked from its library"),
    Check("extension_libraries", "vendor_library", "kernelwright.judge.work:vendor_flag",
          "no cuBLAS/cuDNN/... linked or referenced by the built extension, no CUTLASS/CuTe in its sources"),
    Check("speed_of_light_floor", "faster_than_floor", "kernelwright.judge.floor:apply",
          "measured time compared with max(flops / peak, bytes / bandwidth)"),
)}


def check_flag(check_id: str, severity: str, message: str) -> Flag:
    """The flag a check raises: its code from the registry, the check named on it. Every flag a
    registered check raises is made here (tests/judge/test_checks.py finds any other)."""
    return Flag(flag_code(check_id), severity, message, check=check_id)


def flag_code(check_id: str) -> str:
    """The flag code a check raises (KeyError for an unregistered check: a judge bug)."""
    code = CHECKS[check_id].flag
    if code is None:
        raise ValueError(f"check {check_id} raises no flag")
    return code
