"""Which kernels ncu profiles (hot.py): names mapped to ncu's, the hot ones picked, the rest said.

The name mapping is checked on recorded H100 names: the torch profiler's full kernel names of each
case, shortened as the judge's timing stage shortens them (`kernel_times.short_kernel_name`), must
give the function names ncu printed for the same kernels in the same recording."""
import csv
import json
from pathlib import Path

import pytest

from kernelwright.judge.kernel_times import short_kernel_name
from kernelwright.profile.hot import (NONE, TIMELINE, VERDICT, KernelShare, SelectionLimits, ncu_function, pick,
                                      select_hot, shares_from_timeline, shares_from_verdict)
from kernelwright.profile.torchprof import timeline_from_runner

H100 = Path(__file__).parent / "fixtures" / "h100"
CASES = ("memory", "memory_scalar", "compute", "latency", "latency_chase", "launch", "host")
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
SOFTMAX = ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>"
           "(float*, float const*, int, int, int, bool const*, int, bool)")


def _ncu_names(case: str) -> set[str]:
    rows = list(csv.reader(line for line in (H100 / case / "stage1.csv").read_text().splitlines()
                           if line.startswith('"')))
    column = rows[0].index("Kernel Name")
    return {row[column] for row in rows[1:] if row[0].strip()}


@pytest.mark.parametrize("case", CASES)
def test_recorded_names_map_to_the_functions_ncu_printed(case):
    timeline = json.loads((H100 / case / "timeline.json").read_text())["timeline"]
    for kernel in timeline["top_kernels"]:
        assert ncu_function(kernel["name"]) in _ncu_names(case), kernel["name"]
        assert ncu_function(short_kernel_name(kernel["name"])) in _ncu_names(case), short_kernel_name(kernel["name"])


def test_names_that_do_not_give_a_whole_function_name():
    assert ncu_function("at::native::vectorized_elementwise_kernel<FillFunctor …>") == "vectorized_elementwise_kernel"
    assert ncu_function("cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4 …>") == "Kernel2"
    assert ncu_function("at::native::reduce_kernel<…>") == "reduce_kernel"
    assert ncu_function("at::native::foo<bar_with_a_long_te…") == "foo"  # cut inside the template: whole name
    assert ncu_function(SOFTMAX) == "softmax_warp_forward"
    assert ncu_function(short_kernel_name(SOFTMAX)) == "softmax_warp_forward"
    assert ncu_function("at::native::") is None  # what verdicts before 2026-11-28 wrote for it
    assert ncu_function("sm90_xmma_gemm_bf16bf16_…") is None  # the function name itself was cut
    assert ncu_function("3 other kernels") is None


def _record(*kernels) -> dict:
    return {"available": True, "kernels": [{"name": n, "share": s, "us_per_call": s * 100, "launches_per_call": c}
                                           for n, s, c in kernels]}


def test_the_hot_kernels_are_picked_and_the_rest_left_out_with_their_reasons():
    record = _record(("gemm_kernel", 0.55, 1), ("at::native::elementwise_kernel<MulFunctor …>", 0.2, 2),
                     ("bias_kernel", 0.15, 1), ("tiny_kernel", 0.04, 3), ("2 other kernels", 0.06, 2))
    chosen = select_hot(record, None, SelectionLimits(hot_kernels=3, min_share=0.05, cover=0.8, max_launches=6))
    assert chosen.source == VERDICT and chosen.functions == ["gemm_kernel", "elementwise_kernel", "bias_kernel"]
    assert chosen.launch_count == 4 and not chosen.capped  # 1 + 2 + 1 launches per forward
    why = {k.name: k.why for k in chosen.left_out}
    assert "under the 5%" in why["tiny_kernel"] and "without names" in why["2 other kernels"]
    assert pick(shares_from_verdict(record), SelectionLimits(cover=0.7), VERDICT).left_out[0].why.startswith(
        "the kernels picked already cover 75%")
    assert "beyond the 1 hottest" in pick(shares_from_verdict(record), SelectionLimits(hot_kernels=1), VERDICT
                                          ).left_out[0].why
    text = chosen.summary()
    assert "`gemm_kernel` (55%" in text and "90% of the GPU time" in text and "`tiny_kernel` (4%): under" in text


def test_the_hottest_is_profiled_whatever_its_share_and_launches_are_bounded():
    record = _record(("a_kernel", 0.03, 40), ("b_kernel", 0.02, 1))
    chosen = select_hot(record, None, SelectionLimits(min_share=0.05, max_launches=6, calls=2))
    assert chosen.functions == ["a_kernel"] and chosen.launch_count == 6 and chosen.capped


def test_template_instances_share_a_function_and_its_launch_budget():
    record = _record(("at::native::vectorized_elementwise_kernel<addcmul_cuda_kernel …>", 0.6, 1),
                     ("at::native::vectorized_elementwise_kernel<FillFunctor …>", 0.02, 3))
    chosen = select_hot(record, None, SelectionLimits(max_launches=8))
    assert chosen.functions == ["vectorized_elementwise_kernel"] and chosen.launch_count == 4  # its cold sibling's too
    assert "profiled with 1 other instance" in chosen.picked[0].note


def test_settling_says_which_picked_kernels_ncu_did_not_reach():
    chosen = select_hot(_record(("a_kernel", 0.6, 30), ("b_kernel", 0.4, 1)), None, SelectionLimits(max_launches=4))
    chosen.settle(["a_kernel"])
    assert [k.name for k in chosen.picked] == ["a_kernel"] and chosen.covered == pytest.approx(0.6)
    assert "bound of 4 launches" in chosen.missed[0].why and "Asked for but not profiled: `b_kernel`" in chosen.summary()
    uncapped = select_hot(_record(("a_kernel", 1.0, 1)), None, SelectionLimits())
    uncapped.settle([])
    assert "no launch of it" in uncapped.missed[0].why


def _timeline(case: str):
    return timeline_from_runner(json.loads((H100 / case / "timeline.json").read_text()))


def test_the_timeline_stands_in_where_the_verdict_has_no_shares_or_unusable_names():
    launch = _timeline("launch")
    unavailable = {"available": False, "reason": "evaluated on the CPU"}
    chosen = select_hot(unavailable, launch, SelectionLimits())
    assert chosen.source == TIMELINE and chosen.note == "evaluated on the CPU"
    assert chosen.functions == ["vectorized_elementwise_kernel"] and chosen.picked[0].name == FILL
    broken = _record(("at::native::", 0.7, 1), ("add_kernel", 0.3, 1))  # an older verdict's name
    chosen = select_hot(broken, launch, SelectionLimits())
    assert chosen.source == TIMELINE and "`at::native::` do not give ncu's function names" in chosen.note
    alone = select_hot(broken, None, SelectionLimits())  # no timeline: the verdict, that kernel left out
    assert alone.source == VERDICT and alone.functions == ["add_kernel"]
    assert "does not give the whole function name" in alone.left_out[0].why
    nothing = select_hot(None, None, SelectionLimits(max_launches=5))
    assert nothing.source == NONE and nothing.launch_count == 5 and nothing.functions == []
    nothing.settle(["k1", "k2"])
    assert "the first 5 launches" in nothing.summary() and "`k1`, `k2`" in nothing.summary()


def test_timeline_shares_name_their_remainder():
    shares = shares_from_timeline(_timeline("host"))
    assert shares[-1].aggregate or sum(k.share for k in shares) == pytest.approx(1.0)
    assert all(isinstance(k, KernelShare) for k in shares) and shares == sorted(shares, key=lambda k: -k.share)
    assert shares_from_timeline(None) is None and shares_from_verdict({"available": True, "kernels": []}) is None
