"""Determinism: the same tells give the same asks, so a resume is a replay of the stored log."""
from __future__ import annotations

import json
import random

import pytest

from search_scripts import Script, failed, passed, problem

from kernelwright.search.asks import ask_from_dict, ask_hash, result_from_dict, result_to_dict
from kernelwright.search.budget import Limits
from kernelwright.search.core import Engine
from kernelwright.search.settings import Settings


def make(strategy: str) -> Engine:
    settings = Settings(strategy=strategy, drafts=2, parallel=3, iterations=8, generations=2, max_repairs=1,
                        analyst=True)
    return Engine(problem(), strategy, Limits(max_calls=40), settings, rng_seed=7)


def judge(cid, code, n):
    return failed() if n % 3 == 1 else passed(1.0 + (n * 37 % 11) / 10)


def run_recording(strategy: str, seed: int):
    """Run to the end answering asks in a random order (as concurrent answers would arrive);
    return the tell log and the outstanding asks' hashes before each tell."""
    e = make(strategy)
    script = Script(judge)
    order = random.Random(seed)
    outstanding = []
    while not e.done:
        asks = e.ask()
        outstanding.append([ask_hash(a) for a in asks])
        script.run(e, steps=1, pick=lambda asks: order.choice(asks))
    return e, script.log, outstanding


def stored(result):
    """What the run store keeps and gives back: the result's JSON."""
    return result_from_dict(json.loads(json.dumps(result_to_dict(result))))


@pytest.mark.parametrize("strategy", ["greedy", "beam", "mcts"])
def test_replaying_the_log_rebuilds_the_same_engine(strategy):
    original, log, _ = run_recording(strategy, seed=1)
    replayed = make(strategy)
    for ask_id, result, elapsed in log:
        replayed.tell(ask_id, stored(result), elapsed)
    assert replayed.done
    assert [n.to_dict() for n in replayed.tree] == [n.to_dict() for n in original.tree]
    assert replayed.trajectory.to_dicts() == original.trajectory.to_dicts()
    assert replayed.snapshot() == original.snapshot()


@pytest.mark.parametrize("strategy", ["greedy", "mcts"])
def test_a_partial_replay_asks_exactly_what_was_outstanding(strategy):
    _, log, outstanding = run_recording(strategy, seed=3)
    for cut in (0, 1, len(log) // 2, len(log) - 1):
        replayed = make(strategy)
        for ask_id, result, elapsed in log[:cut]:
            replayed.tell(ask_id, stored(result), elapsed)
        assert [ask_hash(a) for a in replayed.ask()] == outstanding[cut]


def test_different_answer_orders_give_different_but_valid_runs():
    a, log_a, _ = run_recording("mcts", seed=1)
    b, log_b, _ = run_recording("mcts", seed=2)
    assert [x for x, _, _ in log_a] != [x for x, _, _ in log_b]
    assert a.done and b.done and a.best() is not None and b.best() is not None


def test_asks_round_trip_through_json():
    e = make("mcts")
    for ask in e.ask():
        again = ask_from_dict(json.loads(json.dumps(ask.to_dict())))
        assert ask_hash(again) == ask_hash(ask) and again.id == ask.id


def test_batches_told_together_replay_as_batches(tmp_path):
    """The driver stores results that arrived together with `with_next`; the session tells them
    together again on resume, so the replayed engine asks exactly what the original asked."""
    from kernelwright.search.drivers.session import SearchSession
    from kernelwright.store import RunStore

    original, store = make("greedy"), RunStore.in_dir(tmp_path)
    store.create_run("r1", problem_path="p.py", problem_name="relu", problem_hash="h", problem_source="x",
                     settings={})
    script, order = Script(judge), random.Random(5)
    while not original.done:
        asks = original.ask()
        batch = asks if all(not hasattr(a, "agent") for a in asks) and len(asks) > 1 else [order.choice(asks)]
        results = [(a, script.answer(a)) for a in batch]
        for index, (ask, result) in enumerate(results):
            store.save_ask("r1", ask.to_dict(), ask_hash(ask))
            store.save_result("r1", ask.id, result_to_dict(result), 1.0, with_next=index < len(results) - 1)
        original.tell_many([(a.id, r) for a, r in results], 1.0)
    grouped = [e.with_next for e in store.journal("r1")]
    assert any(grouped), "the scenario must tell at least one batch"
    replayed = make("greedy")
    session = SearchSession.__new__(SearchSession)  # only the replay helper is needed
    group = []
    for entry in store.journal("r1"):
        group.append(entry)
        if not entry.with_next:
            session._tell_group(replayed, group)
            group = []
    assert [n.to_dict() for n in replayed.tree] == [n.to_dict() for n in original.tree]
    assert replayed.snapshot() == original.snapshot()
    store.close()
