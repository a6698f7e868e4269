"""Re-judging a run's stored candidates under another rule set (search/drivers/rejudge.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.batch_folder import REQUEST_SUFFIX, VERDICT_SUFFIX
from kernelwright.judge.verdict import TrialResult, Verdict
from kernelwright.search.drivers.rejudge import RejudgeOptions, eligible, rejudge
from kernelwright.search.drivers.session import RunError
from kernelwright.store import RunStore

JUDGE_TESTS = Path(__file__).resolve().parents[1] / "judge"
PROBLEM = (JUDGE_TESTS / "problems" / "conv_relu_bias.py").read_text()
CANDIDATES = JUDGE_TESTS / "candidates" / "rules"


def _passed(cid: str, rules: str = "kernelbench", device: str = "cpu") -> dict:
    return Verdict(problem="conv_relu_bias.py", candidate=cid, status="pass", stage="done", rules=rules,
                   device=device, trials=[TrialResult(0, 42, "given", True)]).to_dict()


@pytest.fixture
def run_dir(tmp_path):
    """A hand-made run: two correct candidates, one that failed a trial, judged under kernelbench."""
    folder = tmp_path / "run"
    store = RunStore.in_dir(folder)
    judge = JudgeConfig(device="cpu", time=False, trials=1, cache_dir=str(tmp_path / "cache")).to_dict()
    store.create_run("r1", problem_path="/x/conv_relu_bias.py", problem_name="conv_relu_bias", problem_hash="h",
                     problem_source=PROBLEM, settings={"judge": judge})
    nodes = [{"id": "root", "action": "reference", "status": "reference"}]
    for cid in ("conv_torch_epilogue", "conv_triton_direct", "wrong"):
        code = (CANDIDATES / f"{cid}.py").read_text() if cid != "wrong" else "class ModelNew: pass\n"
        nodes.append({"id": cid, "parent_id": "root", "action": "draft", "status": "pass", "code": code})
    store.upsert_candidates("r1", nodes)
    store.save_verdict("r1", "conv_torch_epilogue", _passed("conv_torch_epilogue"))
    store.save_verdict("r1", "conv_triton_direct", _passed("conv_triton_direct"))
    failed = _passed("wrong")
    failed.update(status="fail", stage="check", trials=[TrialResult(0, 42, "given", False).__dict__])
    store.save_verdict("r1", "wrong", failed)
    store.close()
    return folder


def test_only_correct_candidates_are_judged_again(run_dir):
    with RunStore.in_dir(run_dir, create=False) as store:
        chosen, skipped = eligible(store, "r1", "strict")
    assert sorted(r["id"] for r in chosen) == ["conv_torch_epilogue", "conv_triton_direct"]
    assert "not correct" in skipped["wrong"]


def test_local_rejudge_stores_a_strict_column_beside_the_search_verdicts(run_dir):
    outcome = rejudge(RejudgeOptions(str(run_dir), "strict", time=False), log=lambda line: None)
    assert outcome.judged == {"conv_torch_epilogue": "fail", "conv_triton_direct": "pass"}
    with RunStore.in_dir(run_dir, create=False) as store:
        table = {(r["candidate_id"], r["rules"]): r["status"] for r in store.verdict_rows("r1")}
        assert table[("conv_torch_epilogue", "kernelbench")] == "pass"
        assert table[("conv_torch_epilogue", "strict")] == "fail"
        assert store.verdict("r1", "conv_torch_epilogue")["rules"] == "kernelbench"  # the run's own verdict
    again = rejudge(RejudgeOptions(str(run_dir), "strict", time=False), log=lambda line: None)
    assert again.judged == {} and "already judged" in again.skipped["conv_triton_direct"]


def test_batch_rejudge_writes_requests_then_collects_their_verdicts(run_dir):
    outcome = rejudge(RejudgeOptions(str(run_dir), "library", eval_mode="batch"), log=lambda line: None)
    folder = run_dir / "rejudge-library"
    assert outcome.folder == folder and len(outcome.pending) == 2 and outcome.judged == {}
    assert (folder / f"conv_triton_direct{REQUEST_SUFFIX}").is_file()
    verdict = Verdict.from_dict(_passed("conv_triton_direct", rules="library", device="cuda"))  # as a GPU wrote it
    (folder / f"conv_triton_direct{VERDICT_SUFFIX}").write_text(verdict.to_json())
    outcome = rejudge(RejudgeOptions(str(run_dir), "library", eval_mode="batch"), log=lambda line: None)
    assert outcome.judged == {"conv_triton_direct": "pass"} and len(outcome.pending) == 1
    with RunStore.in_dir(run_dir, create=False) as store:
        assert store.verdict("r1", "conv_triton_direct", rules="library")["device"] == "cuda"


def test_a_gpu_run_is_not_rejudged_locally_without_a_gpu(run_dir, monkeypatch):
    import torch

    with RunStore.in_dir(run_dir, create=False) as store:
        run = store.run("r1")
        settings = run["settings"]
        settings["judge"]["device"] = "auto"
        store.update_run("r1", settings=settings)
        store.save_verdict("r1", "conv_triton_direct", _passed("conv_triton_direct", device="cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RunError, match="--eval batch"):
        rejudge(RejudgeOptions(str(run_dir), "strict", candidates=["conv_triton_direct"]), log=lambda line: None)
