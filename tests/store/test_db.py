"""The run database: schema, versioning, and every write committed when its method returns."""
from __future__ import annotations

import sqlite3

import pytest

from kernelwright.store import SCHEMA_VERSION, RunStore, StoreError, migrate


def make_store(tmp_path) -> RunStore:
    store = RunStore.in_dir(tmp_path / "run")
    store.create_run("r1", problem_path="/p/relu.py", problem_name="relu", problem_hash="ab" * 32,
                     problem_source="print(1)", settings={"search": {"strategy": "greedy"}})
    return store


def other_connection(store: RunStore) -> sqlite3.Connection:
    """A second reader, as `kernelwright runs show` in another process would be."""
    conn = sqlite3.connect(store.path)
    conn.row_factory = sqlite3.Row
    return conn


def ask(ask_id: str, kind: str = "completion") -> dict:
    return {"type": kind, "id": ask_id, "agent": "coder", "request": {"messages": []}}


def test_schema_is_versioned_and_in_wal_mode(tmp_path):
    store = make_store(tmp_path)
    conn = other_connection(store)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"runs", "asks", "journal", "candidates", "verdicts", "llm_calls", "events"} <= tables


def test_a_newer_schema_is_refused(tmp_path):
    path = tmp_path / "run.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer"):
        RunStore(path)


def test_migrate_is_idempotent(tmp_path):
    store = make_store(tmp_path)
    assert migrate(store.conn) == SCHEMA_VERSION
    assert store.run()["id"] == "r1"


def _open_at(path: str, barrier) -> None:
    barrier.wait()
    RunStore(path).close()


def test_processes_opening_a_new_database_at_once_migrate_it_once(tmp_path):
    """A run creating its database while a reader (runs show, the MCP server) opens it."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    for attempt in range(3):
        path = str(tmp_path / f"run{attempt}.sqlite")
        barrier = context.Barrier(4)
        procs = [context.Process(target=_open_at, args=(path, barrier)) for _ in range(4)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(60)
        assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
        assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_opening_a_missing_database_without_create_fails(tmp_path):
    with pytest.raises(StoreError, match="no run database"):
        RunStore.in_dir(tmp_path / "nothing", create=False)


def test_every_write_is_visible_to_another_connection_at_once(tmp_path):
    store = make_store(tmp_path)
    reader = other_connection(store)
    assert store.save_ask("r1", ask("a1"), "h1") is True
    assert reader.execute("SELECT COUNT(*) FROM asks").fetchone()[0] == 1
    call = {"ask_id": "a1", "agent": "coder", "request": {"messages": []}, "request_hash": "x",
            "completion": {"text": "answer", "usage": {"input_tokens": 3, "output_tokens": 4},
                           "cost_usd": 0.5, "provider": "p", "model": "m", "latency_s": 0.1}}
    store.save_result("r1", "a1", {"type": "completion", "text": "answer"}, 1.5, llm_call=call)
    row = reader.execute("SELECT result, answered FROM asks WHERE id = 'a1'").fetchone()
    assert row["result"] is not None and row["answered"] is not None
    assert reader.execute("SELECT answer, output_tokens FROM llm_calls").fetchone()[:] == ("answer", 4)
    assert reader.execute("SELECT kind, ask_id, elapsed_s FROM journal").fetchone()[:] == ("tell", "a1", 1.5)


def test_asks_are_stored_once_and_answered_once(tmp_path):
    store = make_store(tmp_path)
    assert store.save_ask("r1", ask("a1"), "h1")
    assert store.save_ask("r1", ask("a1"), "h1") is False
    store.save_result("r1", "a1", {"type": "failure", "kind": "X", "message": "m"}, None)
    with pytest.raises(StoreError, match="already has a result"):
        store.save_result("r1", "a1", {"type": "failure", "kind": "X", "message": "m"}, None)
    with pytest.raises(StoreError, match="never stored"):
        store.save_result("r1", "a9", {"type": "failure", "kind": "X", "message": "m"}, None)


def test_a_failed_result_write_leaves_nothing_behind(tmp_path):
    store = make_store(tmp_path)
    store.save_ask("r1", ask("a1"), "h1")
    bad_call = {"ask_id": "a1", "request": object()}  # not JSON: the transaction must roll back
    with pytest.raises(TypeError):
        store.save_result("r1", "a1", {"type": "failure", "kind": "X", "message": "m"}, 1.0, llm_call=bad_call)
    assert store.ask("r1", "a1")["result"] is None
    assert store.journal("r1") == [] and store.llm_calls("r1") == []


def test_journal_keeps_tells_and_limit_changes_in_order(tmp_path):
    store = make_store(tmp_path)
    for n in (1, 2, 3):
        store.save_ask("r1", ask(f"a{n}"), f"h{n}")
    store.save_result("r1", "a2", {"type": "failure", "kind": "X", "message": "two"}, 1.0)
    store.save_limits("r1", {"max_calls": 9}, 1.5)
    store.save_result("r1", "a1", {"type": "failure", "kind": "X", "message": "one"}, 2.0)
    entries = store.journal("r1")
    assert [(e.kind, e.ask_id) for e in entries] == [("tell", "a2"), ("limits", None), ("tell", "a1")]
    assert entries[0].payload["message"] == "two" and entries[1].payload == {"max_calls": 9}
    assert store.last_elapsed("r1") == 2.0
    assert [a["id"] for a in store.asks("r1")] == ["a1", "a2", "a3"]


def test_evaluation_results_keep_the_full_verdict(tmp_path):
    store = make_store(tmp_path)
    store.save_ask("r1", {"type": "evaluation", "id": "a4", "candidate_id": "c2", "code": "x"}, "h")
    verdict = {"status": "pass", "stage": "done", "speedup": {"eager": 2.5, "compile_default": 1.1},
               "timing": {"median_ms": 0.4}, "device": "cuda"}
    store.save_result("r1", "a4", {"type": "evaluation", "status": "pass"}, 3.0, verdict=verdict)
    assert store.verdict("r1", "c2") == verdict
    row = other_connection(store).execute("SELECT speedup_eager, speedup_compile, median_ms FROM verdicts").fetchone()
    assert row[:] == (2.5, 1.1, 0.4)


def test_candidates_are_upserted(tmp_path):
    store = make_store(tmp_path)
    node = {"id": "c1", "parent_id": "c0", "search_parent": "c0", "action": "draft", "status": "pending",
            "code": "class ModelNew: ...", "visits": 0}
    store.upsert_candidates("r1", [node])
    store.upsert_candidates("r1", [{**node, "status": "pass", "speedup": 1.7, "visits": 2}])
    rows = store.candidates("r1")
    assert len(rows) == 1 and rows[0]["status"] == "pass" and rows[0]["speedup"] == 1.7
    assert rows[0]["node"]["visits"] == 2


def test_run_status_updates_record_events(tmp_path):
    store = make_store(tmp_path)
    store.update_run("r1", status="paused", detail="1 prompt waits", spend={"calls": 2})
    run = store.run("r1")
    assert (run["status"], run["status_detail"], run["spend"]) == ("paused", "1 prompt waits", {"calls": 2})
    assert [e["kind"] for e in store.events("r1")] == ["created", "status"]
    with pytest.raises(StoreError, match="no run"):
        store.run("nope")


def test_a_workspace_database_may_hold_several_runs(tmp_path):
    store = make_store(tmp_path)
    store.create_run("r2", problem_path="/p/b.py", problem_name="b", problem_hash="cd" * 32,
                     problem_source="", settings={})
    assert [r["id"] for r in store.runs()] == ["r1", "r2"]
    with pytest.raises(StoreError, match="holds 2 runs"):
        store.run()
