"""One SQLite database per run (or per workspace): everything a run did, committed as it happens.

Tables (all keyed by run id, so one file may hold many runs):

    runs        the problem (path, source, hash), settings JSON, status, best candidate, spend
    asks        the replay log: every ask the engine made (payload JSON) and its result JSON
    journal     the order in which results (and budget changes, a new target, verdicts judged again)
                were told to the engine
    candidates  the tree: code, plan, parent links, search statistics (rebuilt by a replay)
    verdicts    the judge's full verdict per evaluated candidate and rule set (a run's candidates can be
                re-judged under another rule set: `kernelwright rejudge`)
    llm_calls   every model call: request (no secrets), answer, usage, cost, provider, latency
    events      anything else worth reading later (paused, resumed, diverged, finished)

Every write is its own transaction (committed before the method returns), in WAL mode, so a run
killed at any instant leaves a consistent database; `journal` + `asks` is what a resume needs.
The schema version lives in PRAGMA user_version; `migrate()` brings older files up to date.
"""
from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

SCHEMA_VERSION = 2
DB_NAME = "run.sqlite"

_SCHEMA_V1 = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY, problem_path TEXT NOT NULL, problem_name TEXT NOT NULL,
    problem_hash TEXT NOT NULL, problem_source TEXT NOT NULL, settings TEXT NOT NULL,
    status TEXT NOT NULL, status_detail TEXT, best_candidate TEXT, best_speedup REAL,
    spend TEXT, created TEXT NOT NULL, updated TEXT NOT NULL);
CREATE TABLE asks (
    run_id TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
    agent TEXT, candidate_id TEXT, payload TEXT NOT NULL, payload_hash TEXT NOT NULL,
    result TEXT, created TEXT NOT NULL, answered TEXT, PRIMARY KEY (run_id, id));
CREATE TABLE journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, kind TEXT NOT NULL,
    ask_id TEXT, payload TEXT, elapsed_s REAL, created TEXT NOT NULL);
CREATE TABLE candidates (
    run_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT, search_parent TEXT,
    action TEXT NOT NULL, status TEXT NOT NULL, plan TEXT, approach_key TEXT, code TEXT,
    code_hash TEXT, speedup REAL, value REAL, visits INTEGER, value_sum REAL, depth INTEGER,
    reason TEXT, node TEXT NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (run_id, id));
CREATE TABLE verdicts (
    run_id TEXT NOT NULL, candidate_id TEXT NOT NULL, status TEXT NOT NULL, stage TEXT,
    speedup_eager REAL, speedup_compile REAL, median_ms REAL, device TEXT, json TEXT NOT NULL,
    created TEXT NOT NULL, PRIMARY KEY (run_id, candidate_id));
CREATE TABLE llm_calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, ask_id TEXT, agent TEXT,
    request TEXT NOT NULL, request_hash TEXT, answer TEXT, input_tokens INTEGER,
    output_tokens INTEGER, cost_usd REAL, provider TEXT, model TEXT, spec TEXT, latency_s REAL,
    error_type TEXT, error TEXT, created TEXT NOT NULL);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, ts TEXT NOT NULL,
    kind TEXT NOT NULL, payload TEXT);
CREATE INDEX journal_run ON journal (run_id, seq);
CREATE INDEX asks_run ON asks (run_id, seq);
CREATE INDEX llm_calls_ask ON llm_calls (run_id, ask_id);
CREATE INDEX events_run ON events (run_id, id);
"""


def verdict_rules(verdict: dict[str, Any]) -> str:
    """The rule set a stored verdict was judged by; verdicts from before rule sets carry the judge's
    `torch_op_policy` ("reject" was what is now the strict rule set)."""
    config = verdict.get("config") or {}
    if verdict.get("rules") or config.get("rules"):
        return str(verdict.get("rules") or config["rules"])
    policy = config.get("torch_op_policy", "reject")
    return "strict" if policy == "reject" else "kernelbench"


def _migrate_v2(conn: sqlite3.Connection) -> None:
    """Verdicts keyed by (run, candidate, rule set), so one run holds verdicts under several sets."""
    _run_script(conn, """
        CREATE TABLE verdicts_v2 (
            run_id TEXT NOT NULL, candidate_id TEXT NOT NULL, rules TEXT NOT NULL, status TEXT NOT NULL,
            stage TEXT, speedup_eager REAL, speedup_compile REAL, median_ms REAL, device TEXT,
            json TEXT NOT NULL, created TEXT NOT NULL, PRIMARY KEY (run_id, candidate_id, rules));""")
    cursor = conn.execute("SELECT * FROM verdicts")
    columns = [d[0] for d in cursor.description]
    for row in cursor.fetchall():
        data = dict(zip(columns, row, strict=True))
        rules = verdict_rules(json.loads(data["json"]))
        conn.execute("INSERT INTO verdicts_v2 (run_id, candidate_id, rules, status, stage, speedup_eager,"
                     " speedup_compile, median_ms, device, json, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                     (data["run_id"], data["candidate_id"], rules, data["status"], data["stage"],
                      data["speedup_eager"], data["speedup_compile"], data["median_ms"], data["device"],
                      data["json"], data["created"]))
    _run_script(conn, "DROP TABLE verdicts; ALTER TABLE verdicts_v2 RENAME TO verdicts;")


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Statements separated by ';' (no triggers or strings with ';' in the schema), inside the
    caller's transaction: executescript would commit on its own."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


# version -> script (or function) that brings a database at version-1 to version
MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {1: _SCHEMA_V1, 2: _migrate_v2}


class StoreError(RuntimeError):
    """The database is missing, from a newer kernelwright, or does not hold the run asked for."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass
class JournalEntry:
    seq: int
    kind: str  # "tell", "limits", "target" or "amend" (a verdict judged again after a system error)
    ask_id: str | None
    payload: Any  # for "tell": the stored result dict; for "limits" / "target" / "amend": the new value
    elapsed_s: float | None
    with_next: bool = False  # "tell": told together with the next entry (one batch of results)


def migrate(conn: sqlite3.Connection) -> int:
    """Apply every migration the file lacks; refuse files written by a newer schema. Each step reads
    the version inside its own write transaction, so processes opening a new database at the same
    time (a run creating it, a reader such as `runs show` or the MCP server) never apply one twice."""
    for target in range(1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"the run database has schema version {version}, newer than this "
                                 f"kernelwright's ({SCHEMA_VERSION}); upgrade kernelwright to read it")
            if version < target:
                step = MIGRATIONS[target]
                if callable(step):
                    step(conn)
                else:
                    _run_script(conn, step)
                conn.execute(f"PRAGMA user_version = {target}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return SCHEMA_VERSION


def _enable_wal(conn: sqlite3.Connection, *, wait_s: float = 30.0) -> None:
    """Switch to WAL, retrying while another process holds the lock: sqlite answers a journal-mode
    change with "database is locked" at once, without waiting in its busy handler."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class RunStore:
    """A run database. Methods take and return plain dicts; nothing here knows the engine."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise StoreError(f"no run database at {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        _enable_wal(self.conn)
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        migrate(self.conn)

    @classmethod
    def in_dir(cls, run_dir: str | Path, *, create: bool = True) -> "RunStore":
        return cls(Path(run_dir) / DB_NAME, create=create)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction, committed on exit (or rolled back on an exception)."""
        if self.conn.in_transaction:  # left open by a Ctrl-C between BEGIN and the try below
            self.conn.execute("ROLLBACK")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ---- runs ------------------------------------------------------------------------------

    def create_run(self, run_id: str, *, problem_path: str, problem_name: str, problem_hash: str,
                   problem_source: str, settings: dict[str, Any], status: str = "created") -> None:
        stamp = now()
        with self._tx() as c:
            c.execute("INSERT INTO runs (id, problem_path, problem_name, problem_hash, problem_source,"
                      " settings, status, created, updated) VALUES (?,?,?,?,?,?,?,?,?)",
                      (run_id, problem_path, problem_name, problem_hash, problem_source,
                       _dumps(settings), status, stamp, stamp))
            self._event(c, run_id, "created", {"problem": problem_path})

    def run(self, run_id: str | None = None) -> dict[str, Any]:
        """The run (the only one in the file when `run_id` is None)."""
        if run_id is None:
            rows = self.conn.execute("SELECT id FROM runs ORDER BY created").fetchall()
            if len(rows) != 1:
                raise StoreError(f"{self.path} holds {len(rows)} runs; name the one you mean")
            run_id = rows[0]["id"]
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path} holds no run {run_id!r}")
        return _run_dict(row)

    def runs(self) -> list[dict[str, Any]]:
        return [_run_dict(r) for r in self.conn.execute("SELECT * FROM runs ORDER BY created")]

    def update_run(self, run_id: str, *, status: str | None = None, detail: str | None = None,
                   best_candidate: str | None = None, best_speedup: float | None = None,
                   spend: dict | None = None, settings: dict | None = None) -> None:
        fields = {"status": status, "status_detail": detail, "best_candidate": best_candidate,
                  "best_speedup": best_speedup, "spend": _dumps(spend), "settings": _dumps(settings)}
        fields = {k: v for k, v in fields.items() if v is not None}
        fields["updated"] = now()
        with self._tx() as c:
            c.execute(f"UPDATE runs SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?",
                      (*fields.values(), run_id))
            if status is not None:
                self._event(c, run_id, "status", {"status": status, "detail": detail})

    # ---- the replay log --------------------------------------------------------------------

    def save_ask(self, run_id: str, ask: dict[str, Any], payload_hash: str) -> bool:
        """Persist an ask before it is answered; False when it was stored already (a resume)."""
        with self._tx() as c:
            if c.execute("SELECT 1 FROM asks WHERE run_id = ? AND id = ?", (run_id, ask["id"])).fetchone():
                return False
            seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM asks WHERE run_id = ?",
                            (run_id,)).fetchone()[0]
            c.execute("INSERT INTO asks (run_id, id, seq, kind, agent, candidate_id, payload, payload_hash,"
                      " created) VALUES (?,?,?,?,?,?,?,?,?)",
                      (run_id, ask["id"], seq, ask["type"], ask.get("agent"), ask.get("candidate_id"),
                       _dumps(ask), payload_hash, now()))
        return True

    def ask(self, run_id: str, ask_id: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM asks WHERE run_id = ? AND id = ?", (run_id, ask_id)).fetchone()
        return _ask_dict(row) if row else None

    def asks(self, run_id: str) -> list[dict[str, Any]]:
        return [_ask_dict(r) for r in self.conn.execute(
            "SELECT * FROM asks WHERE run_id = ? ORDER BY seq", (run_id,))]

    def save_result(self, run_id: str, ask_id: str, result: dict[str, Any], elapsed_s: float | None,
                    *, verdict: dict[str, Any] | None = None, llm_call: dict[str, Any] | None = None,
                    with_next: bool = False) -> int:
        """The result of an ask, its journal entry, and what comes with it, in one transaction.
        `with_next`: the engine hears it together with the next stored result. Returns the journal
        sequence number."""
        stamp = now()
        with self._tx() as c:
            row = c.execute("SELECT result, candidate_id FROM asks WHERE run_id = ? AND id = ?",
                            (run_id, ask_id)).fetchone()
            if row is None:
                raise StoreError(f"result for ask {ask_id} of run {run_id}, which was never stored")
            if row["result"] is not None:
                raise StoreError(f"ask {ask_id} of run {run_id} already has a result")
            c.execute("UPDATE asks SET result = ?, answered = ? WHERE run_id = ? AND id = ?",
                      (_dumps(result), stamp, run_id, ask_id))
            cursor = c.execute("INSERT INTO journal (run_id, kind, ask_id, payload, elapsed_s, created)"
                               " VALUES (?,?,?,?,?,?)", (run_id, "tell", ask_id,
                                                         _dumps({"with_next": True}) if with_next else None,
                                                         elapsed_s, stamp))
            if verdict is not None:
                self._save_verdict(c, run_id, row["candidate_id"] or verdict.get("candidate", ""), verdict)
            if llm_call is not None:
                self._save_llm_call(c, run_id, llm_call)
            return cursor.lastrowid

    def save_limits(self, run_id: str, limits: dict[str, Any], elapsed_s: float | None) -> int:
        return self.save_change(run_id, "limits", limits, elapsed_s)

    def save_change(self, run_id: str, kind: str, payload: dict[str, Any], elapsed_s: float | None) -> int:
        """A journal entry that changes the run between results ("limits", "target")."""
        with self._tx() as c:
            cursor = c.execute("INSERT INTO journal (run_id, kind, payload, elapsed_s, created)"
                               " VALUES (?,?,?,?,?)", (run_id, kind, _dumps(payload), elapsed_s, now()))
            return cursor.lastrowid

    def journal(self, run_id: str) -> list[JournalEntry]:
        """Everything told to the engine, in order, with the stored results joined in."""
        rows = self.conn.execute(
            "SELECT j.seq, j.kind, j.ask_id, j.payload, j.elapsed_s, a.result FROM journal j "
            "LEFT JOIN asks a ON a.run_id = j.run_id AND a.id = j.ask_id "
            "WHERE j.run_id = ? ORDER BY j.seq", (run_id,)).fetchall()
        return [JournalEntry(r["seq"], r["kind"], r["ask_id"],
                             _loads(r["result"] if r["kind"] == "tell" else r["payload"]), r["elapsed_s"],
                             r["kind"] == "tell" and bool((_loads(r["payload"]) or {}).get("with_next")))
                for r in rows]

    def last_elapsed(self, run_id: str) -> float:
        value = self.conn.execute("SELECT MAX(elapsed_s) FROM journal WHERE run_id = ?",
                                  (run_id,)).fetchone()[0]
        return float(value or 0.0)

    # ---- candidates, verdicts, calls, events -----------------------------------------------

    def upsert_candidates(self, run_id: str, nodes: list[dict[str, Any]]) -> None:
        """Mirror engine nodes (Node.to_dict()); idempotent, so a replay can rewrite them."""
        if not nodes:
            return
        stamp = now()
        with self._tx() as c:
            for node in nodes:
                self._upsert_candidate(c, run_id, node, stamp)

    @staticmethod
    def _upsert_candidate(c: sqlite3.Connection, run_id: str, node: dict[str, Any], stamp: str) -> None:
        c.execute(
            "INSERT INTO candidates (run_id, id, parent_id, search_parent, action, status, plan,"
            " approach_key, code, code_hash, speedup, value, visits, value_sum, depth, reason,"
            " node, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
            " ON CONFLICT (run_id, id) DO UPDATE SET status = excluded.status,"
            " search_parent = excluded.search_parent,"
            " speedup = excluded.speedup, value = excluded.value, visits = excluded.visits,"
            " value_sum = excluded.value_sum, reason = excluded.reason, node = excluded.node,"
            " updated = excluded.updated",
            (run_id, node["id"], node.get("parent_id"), node.get("search_parent"), node["action"],
             node["status"], node.get("plan"), node.get("approach_key"), node.get("code"),
             node.get("code_hash"), node.get("speedup"), node.get("value"), node.get("visits"),
             node.get("value_sum"), node.get("depth"), node.get("reason"), _dumps(node), stamp, stamp))

    def candidates(self, run_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute("SELECT * FROM candidates WHERE run_id = ? ORDER BY created, rowid",
                                 (run_id,)).fetchall()
        return [{**dict(r), "node": _loads(r["node"])} for r in rows]

    def candidate(self, run_id: str, candidate_id: str) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM candidates WHERE run_id = ? AND id = ?",
                                (run_id, candidate_id)).fetchone()
        return {**dict(row), "node": _loads(row["node"])} if row else None

    def _save_verdict(self, c: sqlite3.Connection, run_id: str, candidate_id: str, verdict: dict) -> None:
        speedup = verdict.get("speedup") or {}
        timing = verdict.get("timing") or {}
        c.execute("INSERT OR REPLACE INTO verdicts (run_id, candidate_id, rules, status, stage, speedup_eager,"
                  " speedup_compile, median_ms, device, json, created) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                  (run_id, candidate_id, verdict_rules(verdict), verdict.get("status", "error"), verdict.get("stage"),
                   speedup.get("eager"), speedup.get("compile_default"), timing.get("median_ms"),
                   verdict.get("device"), _dumps(verdict), now()))

    def amend_verdict(self, run_id: str, candidate_id: str, verdict: dict[str, Any], payload: dict[str, Any],
                      elapsed_s: float | None, node: dict[str, Any] | None = None) -> int:
        """A verdict judged again replaces the candidate's stored one under its rule set, in place
        (the order of evaluations stays), with an "amend" journal entry carrying `payload` (what
        a replay tells the engine) and an event, in one transaction; `node`, when given, is the
        candidate's row as it follows (a run without an engine: the template tuner's instance),
        upserted in the same transaction. Returns the journal sequence."""
        rules, speedup, timing = verdict_rules(verdict), verdict.get("speedup") or {}, verdict.get("timing") or {}
        with self._tx() as c:
            updated = c.execute(
                "UPDATE verdicts SET status = ?, stage = ?, speedup_eager = ?, speedup_compile = ?, median_ms = ?,"
                " device = ?, json = ? WHERE run_id = ? AND candidate_id = ? AND rules = ?",
                (verdict.get("status", "error"), verdict.get("stage"), speedup.get("eager"),
                 speedup.get("compile_default"), timing.get("median_ms"), verdict.get("device"), _dumps(verdict),
                 run_id, candidate_id, rules)).rowcount
            if not updated:
                self._save_verdict(c, run_id, candidate_id, verdict)
            if node is not None:
                self._upsert_candidate(c, run_id, node, now())
            cursor = c.execute("INSERT INTO journal (run_id, kind, ask_id, payload, elapsed_s, created)"
                               " VALUES (?,?,?,?,?,?)", (run_id, "amend", payload.get("ask_id"), _dumps(payload),
                                                         elapsed_s, now()))
            self._event(c, run_id, "rejudged", {"candidate": candidate_id, "status": verdict.get("status"),
                                                "replaced": payload.get("replaced")})
            return cursor.lastrowid

    def save_verdict(self, run_id: str, candidate_id: str, verdict: dict[str, Any]) -> None:
        """A verdict that came without an ask (the template autotuner's instances)."""
        with self._tx() as c:
            self._save_verdict(c, run_id, candidate_id, verdict)

    def verdict(self, run_id: str, candidate_id: str, rules: str | None = None) -> dict[str, Any] | None:
        """The candidate's verdict under `rules`; None: under the rule set the run was searched with,
        else its first verdict (re-judged ones come later)."""
        wanted = rules or self.run_rules(run_id)
        if wanted is not None:
            row = self.conn.execute("SELECT json FROM verdicts WHERE run_id = ? AND candidate_id = ? AND rules = ?",
                                    (run_id, candidate_id, wanted)).fetchone()
            if row is not None or rules is not None:
                return _loads(row["json"]) if row else None
        row = self.conn.execute("SELECT json FROM verdicts WHERE run_id = ? AND candidate_id = ?"
                                " ORDER BY created, rowid LIMIT 1", (run_id, candidate_id)).fetchone()
        return _loads(row["json"]) if row else None

    def run_rules(self, run_id: str) -> str | None:
        """The rule set the run was searched with (from its stored judge settings), if it says."""
        row = self.conn.execute("SELECT settings FROM runs WHERE id = ?", (run_id,)).fetchone()
        judge = ((_loads(row["settings"]) or {}).get("judge") or {}) if row else {}
        return verdict_rules({"rules": judge.get("rules"), "config": judge}) if judge else None

    def verdict_rows(self, run_id: str) -> list[dict[str, Any]]:
        """Every stored verdict's summary row (no JSON): candidate, rule set, status, speedups."""
        return [dict(r) for r in self.conn.execute(
            "SELECT run_id, candidate_id, rules, status, stage, speedup_eager, speedup_compile, median_ms, device,"
            " created FROM verdicts WHERE run_id = ? ORDER BY created, rowid", (run_id,))]

    def _save_llm_call(self, c: sqlite3.Connection, run_id: str, call: dict[str, Any]) -> None:
        completion = call.get("completion") or {}
        usage = completion.get("usage") or {}
        c.execute("INSERT INTO llm_calls (run_id, ask_id, agent, request, request_hash, answer,"
                  " input_tokens, output_tokens, cost_usd, provider, model, spec, latency_s, error_type,"
                  " error, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                  (run_id, call.get("ask_id"), call.get("agent"), _dumps(call.get("request") or {}),
                   call.get("request_hash"), completion.get("text"), usage.get("input_tokens"),
                   usage.get("output_tokens"), completion.get("cost_usd"), completion.get("provider"),
                   completion.get("model"), call.get("spec"), completion.get("latency_s"),
                   call.get("error_type"), call.get("error"), call.get("started_at") or now()))

    def save_llm_call(self, run_id: str, call: dict[str, Any]) -> None:
        """A call that produced no result for the engine (an error), stored on its own."""
        with self._tx() as c:
            self._save_llm_call(c, run_id, call)

    def llm_calls(self, run_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute(
            "SELECT * FROM llm_calls WHERE run_id = ? ORDER BY id", (run_id,))]

    def _event(self, c: sqlite3.Connection, run_id: str, kind: str, payload: Any) -> None:
        c.execute("INSERT INTO events (run_id, ts, kind, payload) VALUES (?,?,?,?)",
                  (run_id, now(), kind, _dumps(payload)))

    def add_event(self, run_id: str, kind: str, payload: Any = None) -> None:
        with self._tx() as c:
            self._event(c, run_id, kind, payload)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return [{**dict(r), "payload": _loads(r["payload"])} for r in self.conn.execute(
            "SELECT * FROM events WHERE run_id = ? ORDER BY id", (run_id,))]


def _run_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["settings"] = _loads(data["settings"])
    data["spend"] = _loads(data["spend"])
    return data


def _ask_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["payload"] = _loads(data["payload"])
    data["result"] = _loads(data["result"])
    return data
