"""Verdicts per rule set (store schema 2): one run holds a candidate's verdict under several sets,
and a database written before rule sets is migrated with its verdicts filed under `strict`."""
from __future__ import annotations

import json
import sqlite3

from kernelwright.store import RunStore
from kernelwright.store.db import _SCHEMA_V1, verdict_rules


def _verdict(rules: str | None, status: str = "pass", policy: str | None = None) -> dict:
    data = {"problem": "p", "candidate": "c1", "status": status, "stage": "done", "device": "cpu",
            "speedup": {"eager": 1.5}, "timing": {"median_ms": 2.0}, "config": {}}
    if rules:
        data["rules"] = rules
    if policy:
        data["config"] = {"torch_op_policy": policy}
    return data


def test_a_schema_1_database_is_migrated_and_its_verdicts_filed_under_strict(tmp_path):
    path = tmp_path / "run.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(_SCHEMA_V1)
    conn.execute("PRAGMA user_version = 1")
    settings = {"judge": {"torch_op_policy": "reject", "trials": 5}}
    conn.execute("INSERT INTO runs (id, problem_path, problem_name, problem_hash, problem_source, settings, status,"
                 " created, updated) VALUES ('r1', '/p.py', 'p', 'h', 's', ?, 'done', 't', 't')", (json.dumps(settings),))
    conn.execute("INSERT INTO verdicts (run_id, candidate_id, status, stage, json, created) VALUES "
                 "('r1', 'c1', 'pass', 'done', ?, '2025-01-01T00:00:00')", (json.dumps(_verdict(None, policy="reject")),))
    conn.commit()
    conn.close()
    with RunStore(path, create=False) as store:
        rows = store.verdict_rows("r1")
        assert [(r["candidate_id"], r["rules"], r["status"]) for r in rows] == [("c1", "strict", "pass")]
        assert store.run_rules("r1") == "strict" and store.verdict("r1", "c1")["status"] == "pass"
        store.save_verdict("r1", "c1", _verdict("kernelbench", status="pass"))
        assert {r["rules"] for r in store.verdict_rows("r1")} == {"strict", "kernelbench"}


def test_a_candidate_keeps_one_verdict_per_rule_set(tmp_path):
    store = RunStore.in_dir(tmp_path / "run")
    store.create_run("r1", problem_path="/p.py", problem_name="p", problem_hash="h", problem_source="s",
                     settings={"judge": {"rules": "kernelbench"}})
    store.save_verdict("r1", "c1", _verdict("kernelbench", "pass"))
    store.save_verdict("r1", "c1", _verdict("strict", "fail"))
    store.save_verdict("r1", "c1", _verdict("strict", "fail"))  # judged again: replaced, not duplicated
    assert store.verdict("r1", "c1")["rules"] == "kernelbench"  # the run's own rule set by default
    assert store.verdict("r1", "c1", rules="strict")["status"] == "fail"
    assert store.verdict("r1", "c1", rules="library") is None
    assert sorted((r["rules"], r["status"]) for r in store.verdict_rows("r1")) == [("kernelbench", "pass"),
                                                                                   ("strict", "fail")]
    store.close()


def test_verdict_rules_of_old_and_new_verdicts():
    assert verdict_rules(_verdict("library")) == "library"
    assert verdict_rules(_verdict(None, policy="reject")) == "strict"
    assert verdict_rules(_verdict(None, policy="warn")) == "kernelbench"
    assert verdict_rules(_verdict(None)) == "strict"  # no policy stored: the old default, reject
    answered_early = {**_verdict(None), "config": {"rules": "library"}}  # a verdict made without a worker
    assert verdict_rules(answered_early) == "library"
