"""ncu command lines, failure explanations, metric filtering, and bounded subprocess runs.

Where a run is needed, a small shell script stands in for ncu (ncu needs a GPU): it behaves like
ncu on the points under test (rejecting a metric, writing nothing) and is written in each test.
"""
import time
from pathlib import Path

from kernelwright.profile import needs
from kernelwright.profile.ncu import (
    NcuPlan, collect_command, explain_failure, filter_metrics, find_ncu, import_command, kernel_filter,
    parse_query_metrics, run_bounded, run_collection, unknown_metric,
)

HANDWRITTEN = Path(__file__).parent / "fixtures" / "handwritten"


def test_collect_command_bounds_kernels_and_skips_warmup():
    plan = NcuPlan(["SpeedOfLight", "Occupancy"], ["gpu__time_duration.sum", "launch__grid_size"], 12, ["add_kernel"])
    cmd = collect_command("/opt/ncu", plan, "/tmp/r/stage1", ["python3", "-m", "runner"])
    assert cmd[0] == "/opt/ncu" and cmd[-3:] == ["python3", "-m", "runner"]
    joined = " ".join(cmd)
    assert "--profile-from-start off" in joined and "--launch-skip 0 --launch-count 12" in joined
    assert "--replay-mode kernel" in joined and "--apply-rules no" in joined  # bounded replay, no rule scripts
    assert "--target-processes all" in joined and "--export /tmp/r/stage1 --force-overwrite" in joined
    assert "--section SpeedOfLight --section Occupancy" in joined
    assert "--metrics gpu__time_duration.sum,launch__grid_size" in joined
    assert "--kernel-name regex:^(add_kernel)$" in joined


def test_kernel_filter_refuses_names_it_cannot_match_safely():
    assert kernel_filter(["a_kernel", "ns::b"]) == [
        "--kernel-name-base", "function", "--kernel-name", "regex:^(a_kernel|ns::b)$"]
    assert kernel_filter([]) == []
    assert kernel_filter(["void k<4>(float*)"]) == []


def test_import_commands():
    raw = import_command("ncu", "/r/stage1.ncu-rep")
    assert raw[:3] == ["ncu", "--import", "/r/stage1.ncu-rep"]
    assert "--page" in raw and raw[raw.index("--page") + 1] == "raw" and "--print-units" in raw
    source = import_command("ncu", "/r/stage2.ncu-rep", "source")
    assert source[source.index("--page") + 1] == "source" and "--print-source" in source


def test_the_collection_asks_for_what_the_findings_read_and_nothing_of_the_old_stages():
    wanted = needs.collection()
    assert wanted.sections == ("LaunchStats", "Occupancy")  # launch and occupancy attributes; no SpeedOfLight
    assert "gpu__time_duration.sum" in wanted.counters and "dram__bytes_read.sum" in wanted.counters
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in wanted.counters
    assert "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum" not in wanted.counters  # read by no rule
    assert "launch__grid_size" not in wanted.counters  # section-only: never a --metrics name
    assert len(wanted.counters) == len(set(wanted.counters))
    assert wanted.source_metrics[0] == "smsp__pcsamp_sample_count" and "SourceCounters" not in wanted.sections
    proven = needs.collection(source_counters=True)
    assert proven.sections[-1] == "SourceCounters" and proven.source_metrics == ()
    plan = NcuPlan(list(wanted.sections), list(wanted.counters + wanted.source_metrics), 3, ["k"], launch_skip=2)
    assert "--launch-skip 2 --launch-count 3" in " ".join(collect_command("ncu", plan, "/r/x", ["p"]))


def test_permission_error_is_explained():
    kind, text = explain_failure(1, (HANDWRITTEN / "ncu_permission_error.txt").read_text(), False, 60)
    assert kind == "permission" and "ERR_NVGPUCTRPERM" in text and "administrator" in text


def test_other_failures_are_explained():
    assert explain_failure(None, "", True, 42)[0] == "timeout"
    assert "42 s" in explain_failure(None, "", True, 42)[1]
    assert explain_failure(0, "==WARNING== No kernels were profiled.", False, 1)[0] == "no_kernels"
    kind, text = explain_failure(1, "==ERROR== The application returned an error code (1).", False, 1)
    assert kind == "app"
    kind, text = explain_failure(2, "==ERROR== something odd", False, 1)
    assert kind == "failed" and "status 2" in text and "something odd" in text


def test_unknown_metric_names_are_extracted():
    assert unknown_metric("==ERROR== Failed to find metric sm__bogus.sum") == "sm__bogus.sum"
    assert unknown_metric("==ERROR== Failed to find metric regex:sm__bogus.sum") == "sm__bogus.sum"
    assert unknown_metric('Metric "dram__nope.sum" not found') == "dram__nope.sum"
    assert unknown_metric("==PROF== Disconnected") is None


def test_query_metrics_parsing_and_filtering():
    text = (
        "Device NVIDIA H100 80GB HBM3 (GH100)\n"
        "---------------------------------------- -------------------------------------\n"
        "Metric Name                              Metric Description\n"
        "dram__bytes_read                         # of bytes read from DRAM\n"
        "sm__throughput                           SM throughput\n"
    )  # hand-written in the layout of `ncu --query-metrics`
    available = parse_query_metrics(text)
    assert available == {"dram__bytes_read", "sm__throughput"}
    kept, dropped = filter_metrics(["dram__bytes_read.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                                    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct"], available)
    assert kept == ["dram__bytes_read.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"]
    assert dropped == ["sm__pipe_tensor_op_gmma_cycles_active.avg.pct"]
    assert filter_metrics(["x.sum"], set()) == (["x.sum"], [])


def test_find_ncu(tmp_path, monkeypatch):
    monkeypatch.delenv("KW_NCU", raising=False)
    fake = tmp_path / "ncu"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert find_ncu(str(fake)) == str(fake)
    assert find_ncu(str(tmp_path / "missing")) is None
    monkeypatch.setenv("KW_NCU", str(fake))
    assert find_ncu() == str(fake)


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "child_survived"
    script = f"(sleep 2; touch {marker}) & sleep 30"
    start = time.perf_counter()
    result = run_bounded(["sh", "-c", script], timeout_s=0.5)
    assert result.timed_out and result.kind == "timeout" and time.perf_counter() - start < 5
    time.sleep(2.5)
    assert not marker.exists()  # the background grandchild died with the group


def test_missing_program_is_a_result_not_an_exception(tmp_path):
    result = run_bounded([str(tmp_path / "no_such_ncu")], timeout_s=5)
    assert not result.ok and result.kind == "missing"


def test_rejected_metrics_are_dropped_and_the_run_retried(tmp_path):
    fake = tmp_path / "ncu"
    log = tmp_path / "calls.log"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        'case "$*" in *bad__one.sum*) echo "==ERROR== Failed to find metric bad__one.sum"; exit 1;; esac\n'
        'case "$*" in *bad__two.ratio*) echo "==ERROR== Failed to find metric bad__two.ratio"; exit 1;; esac\n'
        "exit 0\n"
    )
    fake.chmod(0o755)
    plan = NcuPlan(["SpeedOfLight"], ["good.sum", "bad__one.sum", "bad__two.ratio"], 4)
    result, dropped = run_collection(str(fake), plan, tmp_path / "r", ["prog"], timeout_s=30)
    assert result.ok and dropped == ["bad__one.sum", "bad__two.ratio"]
    calls = log.read_text().splitlines()
    assert len(calls) == 3 and "--metrics good.sum " in calls[-1]


def test_rejected_sections_are_dropped_too(tmp_path):
    fake = tmp_path / "ncu"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *NoSuchSection*) echo "==ERROR== Could not find section NoSuchSection"; exit 1;; esac\n'
        "exit 0\n"
    )
    fake.chmod(0o755)
    plan = NcuPlan(["SpeedOfLight", "NoSuchSection"], ["good.sum"], 4)
    result, dropped = run_collection(str(fake), plan, tmp_path / "r", ["prog"], timeout_s=30)
    assert result.ok and dropped == ["NoSuchSection"]


def test_a_failure_that_is_not_about_names_is_not_retried(tmp_path):
    fake = tmp_path / "ncu"
    log = tmp_path / "calls.log"
    fake.write_text(f"#!/bin/sh\necho x >> {log}\necho '==ERROR== ERR_NVGPUCTRPERM'\nexit 1\n")
    fake.chmod(0o755)
    result, dropped = run_collection(str(fake), NcuPlan(["SpeedOfLight"], ["a.sum"], 1), tmp_path / "r", ["p"], 30)
    assert result.kind == "permission" and dropped == [] and len(log.read_text().splitlines()) == 1
