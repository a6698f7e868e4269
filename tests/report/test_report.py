"""The best file's evidence header and the rich tables of runs.

Verdicts here are written by hand for the tests (no judge ran); they only feed the renderers.
"""
from __future__ import annotations

from rich.console import Console

from kernelwright.judge.verdict import Baselines, TimingStats, TrialResult, Verdict
from kernelwright.report import candidate_tree, progress_panel, run_summary, runs_table, write_best
from kernelwright.store import RunStore

CODE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def stats(ms: float, method: str = "cuda_events") -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, n=100, method=method,
                       l2_flushed=method == "cuda_events")


def gpu_verdict() -> Verdict:
    return Verdict(problem="relu", candidate="c3", status="pass", stage="done",
                   trials=[TrialResult(i, 42 + i, "given", True) for i in range(5)],
                   timing=stats(0.25), baselines=Baselines(eager=stats(0.5), compile_default=stats(0.4)),
                   speedup={"eager": 2.0, "compile_default": 1.6}, device="cuda",
                   environment={"gpu": "NVIDIA H100 80GB HBM3", "capability": "9.0", "torch": "2.11.0",
                                "triton": "3.6.0"})


def cpu_verdict() -> Verdict:
    verdict = gpu_verdict()
    verdict.device, verdict.timing = "cpu", stats(20.0, "wall_cpu")
    verdict.baselines = Baselines(eager=stats(0.01, "wall_cpu"), errors={"compile_default": "skipped on CPU"})
    verdict.speedup = {"eager": 0.0005}
    verdict.environment = {"cpu": "x86_64", "cpu_threads": 2, "torch": "2.13.0"}
    verdict.overrides, verdict.shrunk = {"batch_size": 16, "dim": 1024}, True
    return verdict


def store_with_best(tmp_path, verdict: Verdict | None) -> tuple[RunStore, str]:
    store = RunStore.in_dir(tmp_path)
    store.create_run("r1", problem_path="/kb/19_ReLU.py", problem_name="19_ReLU", problem_hash="f" * 64,
                     problem_source="...", settings={"search": {"strategy": "mcts"}, "llm": {"default": "replay:x"}})
    store.upsert_candidates("r1", [{"id": "c0", "action": "reference", "status": "reference", "speedup": 1.0},
                                   {"id": "c3", "parent_id": "c0", "search_parent": "c0", "action": "draft",
                                    "status": "pass", "code": CODE, "speedup": 2.0, "approach_key": "fuse",
                                    "visits": 2, "value_sum": 1.3},
                                   {"id": "c4", "parent_id": "c3", "search_parent": "c3", "action": "improve",
                                    "status": "fail", "code": CODE, "reason": "trial 0 failed: max abs error 1"}])
    if verdict is not None:
        store.save_ask("r1", {"type": "evaluation", "id": "a3", "candidate_id": "c3", "code": CODE}, "h")
        store.save_result("r1", "a3", {"type": "evaluation"}, 1.0, verdict=verdict.to_dict())
    store.update_run("r1", status="done", best_candidate="c3", best_speedup=2.0,
                     spend={"calls": 6, "tokens": 12000, "usd": 0.12, "evals": 3})
    return store, "r1"


def test_header_states_the_gpu_evidence(tmp_path):
    store, run_id = store_with_best(tmp_path, gpu_verdict())
    path = write_best(store, run_id, tmp_path / "best.py")
    text = path.read_text()
    header, code = text.split("\n\n", 1)[0], text
    assert code.endswith(CODE)
    assert "run r1" in header and "c3 (draft of c0)" in header and "/kb/19_ReLU.py" in header
    assert "5/5 correctness trials passed" in header
    assert "2.00x vs eager PyTorch (0.25 ms vs 0.5 ms)" in header
    assert "1.60x vs torch.compile (0.25 ms vs 0.4 ms)" in header
    assert "NVIDIA H100 80GB HBM3" in header and "torch 2.11.0" in header and "triton 3.6.0" in header
    assert "CPU wall-time" not in header
    assert all(line.startswith("# ") for line in header.splitlines())
    compile(text, "best.py", "exec")  # the header keeps the file valid Python


def test_header_says_when_it_is_cpu_wall_time(tmp_path):
    store, run_id = store_with_best(tmp_path, cpu_verdict())
    header = write_best(store, run_id, tmp_path / "best.py").read_text()
    assert "CPU wall-time, not GPU performance" in header
    assert "batch_size=16, dim=1024 (shrunk to fit a CPU)" in header
    assert "vs torch.compile: n/a (skipped on CPU)" in header


def test_header_without_a_verdict_says_not_verified(tmp_path):
    store, run_id = store_with_best(tmp_path, None)
    text = write_best(store, run_id, tmp_path / "best.py").read_text()
    assert "NOT VERIFIED" in text


def test_no_best_no_file(tmp_path):
    store = RunStore.in_dir(tmp_path)
    store.create_run("r1", problem_path="p", problem_name="p", problem_hash="0" * 64, problem_source="",
                     settings={})
    assert write_best(store, "r1", tmp_path / "best.py") is None and not (tmp_path / "best.py").exists()


def render(renderable) -> str:
    console = Console(record=True, width=160)
    console.print(renderable)
    return console.export_text()


def test_tables_show_runs_and_the_tree(tmp_path):
    store, run_id = store_with_best(tmp_path, gpu_verdict())
    run = store.run(run_id)
    listing = render(runs_table([(tmp_path, run)]))
    assert "19_ReLU" in listing and "mcts" in listing and "2.00x (c3)" in listing and "6 calls" in listing
    summary = render(run_summary(run))
    assert "replay:x" in summary and "done" in summary
    tree = render(candidate_tree(store.candidates(run_id)))
    lines = tree.splitlines()
    assert any("c3 draft pass 2.00x" in line and "N=2" in line for line in lines)
    c4 = next(line for line in lines if "c4" in line)
    assert "fail" in c4 and "max abs error 1" in c4
    assert lines.index(c4) > next(i for i, line in enumerate(lines) if "c3" in line)  # c4 hangs under c3


def test_progress_panel_shows_best_tree_and_spend():
    text = render(progress_panel({"best_id": "c7", "best_speedup": 1.83, "candidates": 9, "passing": 5,
                                  "active_jobs": 2, "spend": {"calls": 12, "tokens": 34000, "usd": 0.5,
                                                             "evals": 7, "elapsed_s": 90},
                                  "limits": {"max_calls": 40, "max_usd": 2.0}}))
    assert "1.83x (c7)" in text and "9 candidates" in text and "12 / 40 calls" in text
    assert "$0.50 / $2.00" in text and "1.5 min" in text
    assert "tune" not in text  # no tuning job yet


def test_progress_shows_what_the_tuning_step_spent():
    from kernelwright.report.progress import progress_line

    snapshot = {"best_id": "c5", "best_speedup": 2.1, "candidates": 6, "passing": 6,
                "spend": {"calls": 3, "evals": 5, "elapsed_s": 61}, "limits": {"max_evals": 16},
                "tuning": {"jobs": 1, "active": 1, "calls": 1, "evals": 4, "device_s": 3.25,
                           "device_label": "GPU-seconds", "adopted": []}}
    text = render(progress_panel(snapshot))
    assert "1 job(s), 1 running: 4 evaluations, 1 Templatizer calls, 3.2 GPU-seconds" in text
    assert progress_line(snapshot) == "[1:01] 6 candidates, 6 correct, 3 LLM calls, 5 / 16 evaluations (4 tuning); best c5 2.10x"


def test_header_names_the_baseline_measurement_behind_the_speedup(tmp_path):
    verdict = cpu_verdict()
    verdict.baselines.measured = {"eager": {
        "cache_file": "relu__eager__0123456789abcdef0123.json", "key_sha256": "ab" * 32,
        "measured_at": "2026-11-23T19:26:37", "from_cache": True, "steady": False,
        "repeats": [[7.95, 7.79, 25], [0.3, 0.2, 20], [1.0, 0.5, 20], [0.5, 0.4, 20]], "rule": "..."}}
    store, run_id = store_with_best(tmp_path, verdict)
    header = write_best(store, run_id, tmp_path / "best.py").read_text().split("\n\n")[0]
    line = next(x for x in header.splitlines() if x.startswith("# baseline:"))
    assert "eager median 0.01 ms, IQR 0 ms, n=100, 4 repeats, NOISY" in line
    assert "measured 2026-11-23T19:26:37" in line and "relu__eager__0123456789abcdef0123.json" in line
    assert "key abababababab" in line


def test_progress_lines_for_logs_and_pipes():
    from kernelwright.report.progress import progress_line

    line = progress_line({"mode": "autotune", "best_id": "t2", "best_speedup": 0.51, "candidates": 3, "passing": 3,
                          "stored_before": 2, "spend": {"evals": 3, "elapsed_s": 75.2}, "limits": {"max_evals": 6}})
    assert line == "[1:15] 3 instances (3 / 6 judged, 2 from the store), 3 correct; best t2 0.51x"
    line = progress_line({"best_id": None, "best_speedup": None, "candidates": 1, "passing": 0,
                          "spend": {"calls": 2, "evals": 1, "elapsed_s": 4}, "limits": {}})
    assert line == "[0:04] 1 candidates, 0 correct, 2 LLM calls, 1 evaluations; no correct candidate yet"
    panel = render(progress_panel({"mode": "autotune", "candidates": 2, "passing": 1,
                                   "spend": {"evals": 2, "elapsed_s": 30}, "limits": {"max_evals": 16}}))
    assert "none (template autotuner)" in panel and "2 / 16 evaluations" in panel and "0.5 min" in panel
