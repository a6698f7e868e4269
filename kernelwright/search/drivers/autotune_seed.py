"""The seed in a run without an LLM (issue 34, point 3): torch.compile's kernels written as a
candidate (seed_start.write_start, docs/seed.md), judged like a template instance, stored as
candidate `s1` (action `seed`, its code's `# origin: inductor seed` line labels it in reports) and
counted for the best, so the run keeps the fastest of the seed and the tuned template instances.

It is judged once, when the run is made, before the tuner starts; a resume counts the stored one
again. It is one evaluation besides `--max-evals` (which counts template instances). A seed that
cannot be written, a batch run (not done yet: the seed would be a request written on the GPU side),
or a seed that fails the judge leaves the run to the templates, the reason logged and stored as the
run's `start` event. On by default; `KW_SEED_START=0` turns it off (search setting `seed_start`'s
default: a run without an LLM takes no search settings).
"""
from __future__ import annotations

import contextlib
import json
from typing import Any

from kernelwright.judge import judge
from kernelwright.search.settings import seed_start_default
from kernelwright.tune.evaluate import Measurement, measured

from .seed_start import announce, judged_start, write_start

SEED_ID = "s1"
PLAN = "torch.compile's own kernels (inductor seed), launch configurations as inductor chose them"


def consider_seed(session, problem_path: str, eval_mode: str) -> None:
    """Write, judge and count the seed of a new run (nothing when KW_SEED_START turns it off)."""
    if not seed_start_default():
        return
    store, plan = session.store, session.plan
    if eval_mode != "local":
        start = {"reason": f"a run without an LLM judges the seed here only (--eval {eval_mode}: not done yet)"}
    else:
        session.activity = "writing torch.compile's kernels as a seed (inductor runs once)"
        session.progress()
        start = write_start(problem_path, plan.judge, eval_mode)
    announce(start)
    settings = dict(store.run(plan.run_id)["settings"])
    store.update_run(plan.run_id, settings={**settings, "start": start})
    store.add_event(plan.run_id, "start", {"written": bool(start.get("code")), "reason": start.get("reason"),
                                           "device": start.get("device")})
    if not start.get("code"):
        return
    path = plan.run_dir / "seed_model_new.py"
    path.write_text(start["code"])
    session.activity = "judging the seed"
    session.progress()
    waiting = plan.shared.waiting() if plan.shared is not None else contextlib.nullcontext()
    with waiting:  # a suite's other runs compute meanwhile
        verdict = judge(problem_path, path, plan.judge)
    measurement = measured({}, verdict, "")
    _store(session, start["code"], measurement)
    _count(session, measurement)
    if not measurement.ok:
        judged_start({"id": SEED_ID, "status": measurement.status, "reason": measurement.error})


def count_stored_seed(session) -> None:
    """A resumed run's seed counts for the best as it did (no new judging)."""
    row = session.store.candidate(session.plan.run_id, SEED_ID)
    measurement = ((row or {}).get("node") or {}).get("measurement")
    if row is not None and row.get("action") == "seed" and measurement:
        _count(session, Measurement.from_dict(measurement))


def _store(session, code: str, measurement) -> None:
    store, run_id = session.store, session.plan.run_id
    record = measurement.to_dict()
    verdict = record.pop("verdict", None)
    if verdict:  # the verdict first: a stored candidate always has its verdict
        store.save_verdict(run_id, SEED_ID, verdict)
    store.upsert_candidates(run_id, [{
        "id": SEED_ID, "parent_id": "c0", "search_parent": "c0", "action": "seed",
        "status": "pass" if measurement.ok else "fail", "code": code, "plan": PLAN,
        "approach_key": "inductor seed", "speedup": ((verdict or {}).get("speedup") or {}).get("eager"), "reason": measurement.error or "",
        "measurement": json.loads(json.dumps(record)), "elapsed_s": round(session.elapsed(), 3)}])


def _count(session, measurement: Any) -> None:
    session.seen.add(SEED_ID)
    if not measurement.ok:
        return
    session.passing.add(SEED_ID)
    if session.best is None or measurement.time_ms < session.best[0]:
        session.best = (measurement.time_ms, SEED_ID)
        session._record_best()
