"""The driver loop and the session: persist before answering, persist before telling, pause, resume.

Answerers here are small async functions standing in for the LLM router and the judge, so these
tests run in a second; the real ones are exercised end to end in tests/e2e.
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from search_scripts import Script, passed, problem

from kernelwright.judge.verdict import Baselines, TimingStats, TrialResult, Verdict
from kernelwright.search.asks import Answer, CompletionAsk, EvaluationAsk, ask_hash
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.drivers.loop import Mirror, Pending, ReplayDiverged, drive
from kernelwright.search.drivers.modes import run_optimization
from kernelwright.search.drivers.session import RunOptions, SearchSession
from kernelwright.search.settings import Settings
from kernelwright.store import RunStore


class Answerer:
    """Answers with a Script after checking the ask was stored first."""

    def __init__(self, store, script, pending_agents=()):
        self.store, self.script, self.pending_agents = store, script, set(pending_agents)
        self.seen = []

    async def answer(self, ask):
        assert self.store.ask("r1", ask.id) is not None, "asked before it was stored"
        self.seen.append(ask.id)
        await asyncio.sleep(0)
        if getattr(ask, "agent", None) in self.pending_agents:
            raise Pending("answer", [f"/x/{ask.id}.prompt.md"], "waits")
        return Answer(self.script.answer(ask))


def setup(tmp_path, **settings):
    store = RunStore.in_dir(tmp_path)
    store.create_run("r1", problem_path="p.py", problem_name="relu", problem_hash="h", problem_source="s",
                     settings={})
    values = {"strategy": "greedy", "drafts": 1, "parallel": 2, "iterations": 3, "tune": False, **settings}
    engine = Engine(problem(), values["strategy"], Limits(), Settings(**values))
    return store, engine


def test_drive_persists_every_ask_and_result_before_the_engine_hears_it(tmp_path):
    store, engine = setup(tmp_path)
    told = []
    original = engine.tell_many

    def tell_many(results, elapsed):
        for ask_id, _ in results:
            assert store.ask("r1", ask_id)["result"] is not None, "told before the result was stored"
            told.append(ask_id)
        original(results, elapsed)

    engine.tell_many = tell_many
    answerer = Answerer(store, Script(lambda *a: passed(1.4)))
    progress = []
    outcome = asyncio.run(drive(engine, Mirror(store, "r1", "eager"), completions=answerer,
                                evaluations=answerer, clock=lambda: 1.0, on_progress=progress.append))
    assert engine.done and not outcome.pending and outcome.told == len(told) == len(store.asks("r1"))
    assert [e.ask_id for e in store.journal("r1")] == told
    assert {c["id"] for c in store.candidates("r1")} == {n.id for n in engine.tree}  # with the reference
    assert store.run("r1")["best_candidate"] == engine.best().id and progress[-1]["done"]


def test_progress_says_what_the_loop_waits_for(tmp_path):
    """While asks are in flight the snapshots say how many wait for an LLM and how many for the
    judge (the CLI's heartbeat names them during a long silence)."""
    store, engine = setup(tmp_path)
    answerer = Answerer(store, Script(lambda *a: passed(1.4)))
    progress = []
    asyncio.run(drive(engine, Mirror(store, "r1", "eager"), completions=answerer, evaluations=answerer,
                      clock=lambda: 1.0, on_progress=progress.append))
    waits = [snap["waiting_on"] for snap in progress]
    assert {"llm": 1, "judge": 0} in waits or {"llm": 2, "judge": 0} in waits  # planners or coders first
    assert any(w["judge"] > 0 and w["llm"] == 0 for w in waits)  # then candidates being judged
    assert waits[-1] == {"llm": 0, "judge": 0}  # nothing in flight at the end
    assert all(set(w) == {"llm", "judge"} for w in waits)


def test_pending_asks_pause_the_loop_without_a_result(tmp_path):
    store, engine = setup(tmp_path)
    answerer = Answerer(store, Script(lambda *a: passed(1.4)), pending_agents={"coder"})
    outcome = asyncio.run(drive(engine, Mirror(store, "r1", "eager"), completions=answerer,
                                evaluations=answerer, clock=lambda: 1.0))
    waiting = list(outcome.pending)
    assert waiting and all(store.ask("r1", a)["result"] is None for a in waiting)
    assert all(engine_ask.agent == "coder" for engine_ask in engine.ask() if engine_ask.id in waiting)
    assert outcome.pending_of("answer")[0].paths[0].name.endswith(".prompt.md")


def test_a_stored_ask_wins_over_a_regenerated_one(tmp_path):
    store, engine = setup(tmp_path)
    ask = engine.ask()[0]
    changed = CompletionAsk(ask.id, ask.agent, ask.request.__class__(
        messages=ask.request.messages[:1] + [ask.request.messages[1].__class__("user", "older prompt")],
        role=ask.request.role), ask.job_id)
    store.save_ask("r1", changed.to_dict(), ask_hash(changed))
    used = Mirror(store, "r1", "eager").persist_ask(ask)
    assert used.request.messages[-1].content == "older prompt"
    assert store.events("r1")[-1]["kind"] == "ask_differs"


def test_a_stored_ask_of_another_kind_means_the_log_diverged(tmp_path):
    store, engine = setup(tmp_path)
    ask = engine.ask()[0]
    other = EvaluationAsk(ask.id, "c9", "code")
    store.save_ask("r1", other.to_dict(), ask_hash(other))
    with pytest.raises(ReplayDiverged, match="different version"):
        Mirror(store, "r1", "eager").persist_ask(ask)


# ---- the session: exchange answers and batch verdicts, with no model and no judge process -------

PLAN = ('```json\n{"steps": [{"region": "Model.forward", "change": "one relu kernel"}],'
        ' "approach": "one pass relu"}\n```')


def hand_written_verdict(name: str) -> str:
    """A verdict written by hand for this test (no judge ran): correct, 2.0x over eager."""
    timing = TimingStats(median_ms=0.5, iqr_ms=0.01, mean_ms=0.5, min_ms=0.49, max_ms=0.6, n=50, method="cuda_events")
    eager = TimingStats(median_ms=1.0, iqr_ms=0.01, mean_ms=1.0, min_ms=0.99, max_ms=1.1, n=50, method="cuda_events")
    verdict = Verdict(problem="relu", candidate=name, status="pass", stage="done",
                      trials=[TrialResult(0, 42, "given", True), TrialResult(1, 43, "signed", True)],
                      timing=timing, baselines=Baselines(eager=eager), speedup={"eager": 2.0},
                      device="cuda", environment={"gpu": "hand-written test GPU", "torch": "0.0"})
    return verdict.to_json()


def write_exchange_answer(run_dir, text: str) -> None:
    folder = run_dir / "exchange"
    pending = [json.loads(p.read_text()) for p in folder.glob("*.request.json")
               if not (folder / json.loads(p.read_text())["answer_file"]).exists()]
    assert len(pending) == 1
    (folder / pending[0]["answer_file"]).write_text(text)


def test_session_pauses_on_exchange_and_batch_and_resumes_to_the_end(tmp_path, kernelbench):
    from search_scripts import code_text

    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(kernelbench / "level1" / "19_ReLU.py"), llm="exchange", eval_mode="batch",
                         settings=Settings(strategy="greedy", drafts=1, iterations=1, parallel=1, skills_k=0, tune=False),
                         overrides={"batch_size": 16, "dim": 64}, run_dir=str(run_dir))
    waiting = run_optimization(options)  # a batch run first needs its evaluation device: no prompt yet
    assert waiting.status == "paused" and waiting.exit_code == 75 and not waiting.pending_prompts
    assert "device.json" in waiting.detail and not (run_dir / "exchange").exists()
    recorded = subprocess.run([sys.executable, "-m", "kernelwright.judge.target", str(run_dir / "evals"),
                               "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert recorded.returncode == 0, recorded.stderr
    first = run_optimization(RunOptions(resume=str(run_dir)))
    assert first.status == "paused" and first.exit_code == 75 and len(first.pending_prompts) == 1
    prompt = first.pending_prompts[0].read_text()
    assert "CPU interpreter" in prompt and "cpu:" in prompt  # the device the batch runner recorded
    write_exchange_answer(run_dir, PLAN)
    second = run_optimization(RunOptions(resume=str(run_dir), limits=Limits(max_calls=5)))
    assert second.status == "paused" and second.pending_prompts
    write_exchange_answer(run_dir, code_text(256))
    third = run_optimization(RunOptions(resume=str(run_dir)))
    assert third.status == "paused" and not third.pending_prompts
    assert [p.name for p in third.pending_evals] == ["c1.request.json"]
    request = json.loads(third.pending_evals[0].read_text())
    assert "BLOCK=256" in request["candidate_source"] and "torch.relu" in request["problem_source"]
    assert request["config"]["overrides"] == {"batch_size": 16, "dim": 64}
    again = run_optimization(RunOptions(resume=str(run_dir)))  # nothing new: still paused, no duplicate
    assert again.status == "paused" and len(list((run_dir / "evals").glob("*.request.json"))) == 1
    (run_dir / "evals" / "c1.verdict.json").write_text(hand_written_verdict("c1"))
    done = run_optimization(RunOptions(resume=str(run_dir)))
    assert done.status == "done" and done.exit_code == 0 and done.best_id == "c1" and done.best_speedup == 2.0
    header = done.best_path.read_text()
    assert "2.00x vs eager PyTorch (0.5 ms vs 1 ms)" in header and "hand-written test GPU" in header
    assert done.snapshot["limits"]["max_calls"] == 5  # the budget given at the first resume stays
    with RunStore.in_dir(run_dir, create=False) as store:
        run_id = store.run()["id"]
        calls = store.llm_calls(run_id)
        assert [c["agent"] for c in calls] == ["planner", "coder"]  # one call per answered prompt
        assert [e.kind for e in store.journal(run_id)] == ["limits", "tell", "tell", "tell"]


def test_a_batch_runs_first_contact_times_the_reference_for_round_one(tmp_path, kernelbench):
    """Issue 31, point 6: the run asks its batch folder for the reference's timing before its first
    prompt; the batch runner (here on this CPU, sizes not shrunk) measures it at first contact with
    the device; the run stores it and round 1's prompt carries it."""
    from kernelwright.judge.config import JudgeConfig

    run_dir = tmp_path / "run"
    judge = JudgeConfig(device="cpu", shrink=False, baselines=("eager",), rep_ms=20, warmup_ms=5, min_reps=5,
                        cache_dir=str(tmp_path / "cache"))
    options = RunOptions(problem=str(kernelbench / "level1" / "19_ReLU.py"), llm="exchange", eval_mode="batch",
                         settings=Settings(strategy="greedy", drafts=1, iterations=1, parallel=1, skills_k=0, tune=False),
                         overrides={"batch_size": 16, "dim": 64}, run_dir=str(run_dir), judge=judge)
    assert run_optimization(options).status == "paused"
    evals = run_dir / "evals"
    assert (evals / "reference.reference.json").is_file() and not list(evals.glob("*.request.json"))
    done = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(evals),
                           "--profile-budget", "0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    measured = json.loads((evals / "reference.reference_timing.json").read_text())
    assert measured["eager_ms"] > 0 and (evals / "device.json").is_file()
    first = run_optimization(RunOptions(resume=str(run_dir)))
    assert first.status == "paused" and len(first.pending_prompts) == 1
    with RunStore.in_dir(run_dir, create=False) as store:
        stored = store.run()["settings"]
    assert stored["reference_timing"]["eager_ms"] == measured["eager_ms"]
    prompt = first.pending_prompts[0].read_text()
    assert "The reference on the target: PyTorch eager" in prompt


def test_resume_refuses_a_changed_problem_file(tmp_path):
    problem_file = tmp_path / "p.py"
    problem_file.write_text(
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return torch.relu(x)\nn = 8\ndef get_inputs():\n    return [torch.rand(n)]\n"
        "def get_init_inputs():\n    return []\n")
    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(problem_file), llm="exchange", run_dir=str(run_dir),
                         settings=Settings(strategy="greedy", drafts=1, iterations=1, skills_k=0, tune=False))
    assert run_optimization(options).status == "paused"
    problem_file.write_text(problem_file.read_text().replace("n = 8", "n = 9"))
    from kernelwright.search.drivers.session import RunError

    with pytest.raises(RunError, match="changed since run"):
        SearchSession(RunOptions(resume=str(run_dir)))


# ---- machine errors and interruptions -------------------------------------------------------------


def test_a_machine_error_stops_the_run_instead_of_failing_the_candidate(tmp_path):
    from kernelwright.judge.config import JudgeConfig
    from kernelwright.search.drivers.evaluators import LocalEvaluator
    from kernelwright.search.drivers.loop import Fatal

    class Pool:  # stands in for the judge's pool: the worker could not import Triton
        def __init__(self, error):
            self.error = error

        async def ajudge(self, problem, candidate, config=None):
            return Verdict(problem="relu", candidate="c1", status="error", stage="compile", error=self.error)

    evaluator = LocalEvaluator("source", "relu", JudgeConfig(), tmp_path)
    ask = EvaluationAsk("a3", "c1", "import triton\n")
    evaluator._pool = Pool("running the module failed with ModuleNotFoundError: No module named 'triton'")
    with pytest.raises(Fatal, match="not the candidate's fault.*pip install triton"):
        asyncio.run(evaluator.answer(ask))
    evaluator._pool = Pool("SyntaxError: invalid syntax")  # the candidate's own error is an answer
    answer = asyncio.run(evaluator.answer(ask))
    assert not answer.result.passed


def test_ctrl_c_during_a_run_leaves_it_interrupted_and_resumable(tmp_path, kernelbench, monkeypatch):
    from kernelwright.search.drivers import session as session_module

    run_dir = tmp_path / "run"
    options = RunOptions(problem=str(kernelbench / "level1" / "19_ReLU.py"), llm="exchange", run_dir=str(run_dir),
                         settings=Settings(strategy="greedy", drafts=1, iterations=1, parallel=1, skills_k=0, tune=False),
                         overrides={"batch_size": 16, "dim": 64})

    async def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(session_module, "drive", interrupted)
    outcome = run_optimization(options)
    assert outcome.status == "interrupted" and outcome.exit_code == 130
    assert f"kernelwright optimize --resume {run_dir}" in outcome.detail
    with RunStore.in_dir(run_dir, create=False) as store:
        assert store.run()["status"] == "interrupted"
    monkeypatch.undo()
    resumed = run_optimization(RunOptions(resume=str(run_dir)))
    assert resumed.status == "paused" and resumed.pending_prompts  # it went on to the exchange prompt
