"""What a verdict gives the prompts: times, spread, both baselines, floor, kernel split, profile, margin."""
from __future__ import annotations

from types import SimpleNamespace

from golden_run import gpu_pass, gpu_wrong

from kernelwright.search.context import verdict_view
from kernelwright.search.results import EvalResult
from kernelwright.search.tree import PASSED, Node
from kernelwright.search.verdict_facts import error_margin


def test_a_passing_gpu_verdict_is_condensed_with_all_its_numbers():
    result = EvalResult.from_verdict(gpu_pass(6.41, 0.012, 8.90, 7.35, 89.9, 0.93, True))  # hand-written
    assert (result.median_ms, result.iqr_ms, result.timed_calls, result.l2_flushed) == (6.41, 0.012, 48, True)
    assert result.baseline_ms == {"eager": 8.90, "compile_default": 7.35}
    assert result.floor["pct_of_floor"] == 89.9 and result.floor["bound"] == "memory"
    assert [k["name"] for k in result.kernels["kernels"]] == ["avg_pool2d_kernel",
                                                             "at::native::vectorized_elementwise_kernel<…>"]
    assert result.profile["bottleneck"] == "memory" and result.profile["kernels"][0]["numbers"]["dram_pct"] == 86.0
    assert len(result.findings) == 2 and result.findings[1].endswith("[vectorized-access]")
    again = EvalResult.from_dict(result.to_dict())  # what the run store keeps
    assert again == result
    node = Node("c2", "c0", "c0", "draft", "code", status=PASSED, eval=again)
    view = verdict_view(node, "eager")
    assert view.on_gpu and view.speedups["compile_default"] == round(7.35 / 6.41, 4) and view.kernels[1]["share"] == 0.07


def test_a_failed_verdict_quotes_its_first_error_lines():
    result = EvalResult.from_verdict(gpu_wrong())
    view = verdict_view(Node("c1", "c0", "c0", "draft", "code", status="fail", eval=result), "eager")
    assert not view.passed and "signed inputs" in view.error and view.error.count("\n") < 12


def test_the_error_margin_is_the_judges_worst_over_trials():
    margin = {"elementwise": 0.4, "rel_l2": 0.7, "worst": 0.7}
    assert error_margin(SimpleNamespace(precision={"margin": margin})) == 0.7
    assert error_margin(SimpleNamespace(precision={"margin": {"elementwise": None, "rel_l2": None, "worst": None}})) is None
    assert error_margin(SimpleNamespace(precision={})) is None  # a verdict from before margins: no claim


def test_the_compiler_report_and_the_seconds_reach_the_tuning_step():
    """What the tuning step reads from a verdict: the compiler's per-kernel resources (ptxas -v text
    here, hand-written) for resource pruning, and the seconds for its cost."""
    from kernelwright.judge.verdict import CompileResult, ProcessInfo

    verdict = gpu_pass(6.41, 0.012, 8.90, 7.35, 89.9, 0.93, True)
    verdict.compile = CompileResult(ok=True, backend="cuda", log=(
        "ptxas info    : Compiling entry function '_Z4tileILi128EEvPKfPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z4tileILi128EEvPKfPf\n"
        "    64 bytes stack frame, 32 bytes spill stores, 32 bytes spill loads\n"
        "ptxas info    : Used 255 registers, 49152 bytes smem, 376 bytes cmem[0]\n"))
    verdict.stage_seconds = {"compile": 9.0, "check": 1.5, "time": 2.0, "baselines": 0.5}
    verdict.process = ProcessInfo(wall_s=14.0)
    result = EvalResult.from_verdict(verdict)
    assert result.resources == [{"name": "_Z4tileILi128EEvPKfPf", "registers": 255, "spills": 64,
                                 "shared_bytes": 49152, "threads": None}]
    assert (result.device_s, result.judge_s) == (4.0, 14.0)
    assert EvalResult.from_dict(result.to_dict()) == result


def test_a_passing_gpu_verdict_without_a_profile_says_so():
    """Only the best candidates are profiled: the prompt says none was taken, never stays silent."""
    from kernelwright.agents import templates

    verdict = gpu_pass(6.41, 0.012, 8.90, 7.35, 89.9, 0.93, True)  # hand-written
    verdict.profile = None
    node = Node("c2", "c0", "c0", "draft", "code", status=PASSED, eval=EvalResult.from_verdict(verdict))
    text = templates.render(templates.make_environment(), "sections/verdict.md.j2", v=verdict_view(node, "eager"),
                            show_error=True)
    assert "Profile: none for this candidate" in text and "Kernels per call" in text
