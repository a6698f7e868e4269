"""A run whose candidates were written elsewhere (a KernelBench generations folder): judge them
with our judge, store the verdicts, keep the best. No search, no LLM.

    run_dir = create_imported_run(options, {"s0": code0, "s1": code1}, origin="runs/my_run")
    outcome = run_imported(RunOptions(resume=str(run_dir)))

Candidates are stored first (status pending, action "import"), then judged: here through the
judge pool (a suite's shared one), or as requests in the batch folder (the run pauses until their
verdicts come back; a resume stores what arrived). Each verdict is stored as it arrives, so an
interrupted run loses nothing and a resume judges only what is left. The run is `done` when every
candidate has a verdict (`failed` when none passed), `paused` while some wait for verdicts.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Any, Callable

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling import batch_folder
from kernelwright.judge.scheduling.pool import JudgePool, visible_gpus
from kernelwright.judge.verdict import Verdict
from kernelwright.report.best import write_best
from kernelwright.store import RunStore

from ..problem_info import describe_problem
from .session import (BEST_FILE, INTERRUPTED_DETAIL, RunError, RunOptions, RunOutcome, check_problem_unchanged, hold_run,
                      mark_stale_interrupted, new_run_dir, new_run_id, prepare_run_dir, resume_command)

MODE = "import"


def create_imported_run(options: RunOptions, candidates: dict[str, str], origin: str) -> Path:
    """A new run folder holding `candidates` (id -> code) to judge against `options.problem`."""
    info = describe_problem(options.problem, options.backend, options.overrides, options.judge.device)
    run_id = new_run_id(info.name)
    run_dir = new_run_dir(options, run_id)
    if (run_dir / "run.sqlite").exists():
        raise RunError(f"{run_dir} already holds a run; resume it with --resume {run_dir}")
    eval_mode = options.eval_mode or "local"
    if eval_mode not in ("local", "batch"):
        raise RunError(f"--eval {eval_mode}: imported candidates are judged here (local) or through a batch folder")
    judge = dataclasses.replace(options.judge, overrides={**options.judge.overrides, **options.overrides})
    settings = {"mode": MODE, "problem": info.to_dict(), "judge": judge.to_dict(), "eval": eval_mode,
                "search": {"strategy": MODE}, "origin": origin, "eval_workers": options.eval_workers,
                "batch_dir": options.batch_dir or "evals", "request_prefix": options.request_prefix}
    prepare_run_dir(options, run_dir)
    with RunStore.in_dir(run_dir) as store:
        store.create_run(run_id, problem_path=info.path, problem_name=info.name, problem_hash=info.source_hash,
                         problem_source=info.source, settings=settings)
        rows = [{"id": "c0", "action": "reference", "status": "reference", "code": info.source, "speedup": 1.0}]
        rows += [{"id": cid, "parent_id": "c0", "search_parent": "c0", "action": "import", "status": "pending",
                  "code": code, "plan": f"imported from {origin}"} for cid, code in candidates.items()]
        store.upsert_candidates(run_id, rows)
    return run_dir


def run_imported(options: RunOptions, on_progress: Callable[[dict], None] | None = None) -> RunOutcome:
    """Judge the run's candidates that have no verdict yet (`options.resume` is the run folder)."""
    run_dir = Path(options.resume)
    lock = hold_run(run_dir)
    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            run = store.run()
            check_problem_unchanged(run)
            mark_stale_interrupted(store, run["id"], run)
            return _ImportSession(store, run, run_dir, options, on_progress).go()
    finally:
        lock.release()


def _waiting_for(verdicts, shared):
    """The verdicts as they come, letting a suite's other runs compute while this one waits."""
    iterator = iter(verdicts)
    while True:
        with shared.waiting() if shared is not None else contextlib.nullcontext():
            item = next(iterator, None)
        if item is None:
            return
        yield item


class _ImportSession:
    def __init__(self, store, run: dict[str, Any], run_dir: Path, options: RunOptions, on_progress):
        self.store, self.run, self.run_dir, self.options, self.on_progress = store, run, run_dir, options, on_progress
        self.settings = run["settings"]
        self.judge = JudgeConfig.from_dict(self.settings["judge"])
        self.run_id = run["id"]

    def candidates(self) -> list[dict[str, Any]]:
        return [c for c in self.store.candidates(self.run_id) if c["action"] == MODE]

    def go(self) -> RunOutcome:
        waiting = [c for c in self.candidates() if self.store.verdict(self.run_id, c["id"]) is None]
        self.store.update_run(self.run_id, status="running", detail=None)
        self.progress()
        pending: list[Path] = []
        try:
            if self.settings.get("eval") == "batch":
                pending = self._batch(waiting)
            else:
                self._local(waiting)
        except KeyboardInterrupt:
            return self.finish("interrupted", f"{INTERRUPTED_DETAIL}; continue with: {resume_command(self.run_dir)}")
        if pending:
            folder = pending[0].parent
            outcome = self.finish("paused", f"{len(pending)} evaluation(s) pending in {folder}: run `kernelwright "
                                            f"judge --batch {folder}` where the GPU is. Then: "
                                            f"{resume_command(self.run_dir)}")
            outcome.pending_evals = pending
            return outcome
        best = self.run.get("best_candidate")
        if best is None:
            return self.finish("failed", f"none of the {len(self.candidates())} imported candidate(s) passed the judge")
        return self.finish("done", f"{len(self.candidates())} imported candidate(s) judged")

    def _local(self, waiting: list[dict[str, Any]]) -> None:
        if not waiting:
            return
        problem = SourceText(self.run["problem_source"], name=f"{self.run['problem_name']}.py")
        jobs = [(problem, SourceText(c["code"], name=c["id"]), self.judge) for c in waiting]
        shared = self.options.shared
        pool = shared.pool if shared is not None else None
        own = pool is None
        if own:
            gpus = visible_gpus() if self.judge.device != "cpu" else ()
            pool = JudgePool(self.judge, gpus=gpus, cpu_workers=max(1, int(self.settings.get("eval_workers") or 1)))
        try:
            for index, verdict in _waiting_for(pool.iter_judge(jobs), shared):  # stopping cancels the rest
                self.record(waiting[index]["id"], verdict)
                if shared is not None and shared.stop.is_set():
                    raise KeyboardInterrupt
        finally:
            if own:
                pool.close(wait=False)

    def _batch(self, waiting: list[dict[str, Any]]) -> list[Path]:
        folder = Path(os.path.normpath(self.run_dir / self.settings.get("batch_dir", "evals")))
        prefix = self.settings.get("request_prefix") or ""
        problem = SourceText(self.run["problem_source"], name=f"{self.run['problem_name']}.py")
        pending = []
        for position, c in enumerate(waiting):
            name = f"{prefix}{c['id']}"
            found = folder / f"{name}{batch_folder.VERDICT_SUFFIX}"
            if found.is_file():
                try:
                    self.record(c["id"], Verdict.from_json(found.read_text()))
                    continue
                except (OSError, ValueError, TypeError):
                    pass  # unreadable: asked again below
            request = folder / f"{name}{batch_folder.REQUEST_SUFFIX}"
            if not request.is_file():
                request = batch_folder.write_request(folder, name, problem, c["code"], self.judge, priority=position)
            pending.append(request)
        return pending

    def record(self, cid: str, verdict) -> None:
        data = verdict.to_dict()
        self.store.save_verdict(self.run_id, cid, data)
        speedup = (data.get("speedup") or {}).get("eager")
        status = "pass" if verdict.status == "pass" else "fail"
        node = dict(self.store.candidate(self.run_id, cid)["node"])
        node.update(status=status, speedup=speedup, reason=(verdict.error or "")[:2000])
        self.store.upsert_candidates(self.run_id, [node])
        self._follow_best()
        self.progress()

    def _follow_best(self) -> None:
        best = None
        for c in self.candidates():
            verdict = self.store.verdict(self.run_id, c["id"]) or {}
            speed = (verdict.get("speedup") or {}).get("eager")
            if verdict.get("status") == "pass" and (best is None or (speed or 0.0) > best[0]):
                best = (speed or 0.0, c["id"], speed)
        if best is not None and best[1] != self.run.get("best_candidate"):
            self.store.update_run(self.run_id, best_candidate=best[1], best_speedup=best[2])
            self.run = self.store.run(self.run_id)
            write_best(self.store, self.run_id, self.run_dir / BEST_FILE, best[1])

    def snapshot(self) -> dict[str, Any]:
        rows = self.store.verdict_rows(self.run_id)
        candidates = self.candidates()
        return {"best_id": self.run.get("best_candidate"), "best_speedup": self.run.get("best_speedup"),
                "candidates": len(candidates), "passing": sum(1 for r in rows if r["status"] == "pass"),
                "spend": {"calls": 0, "tokens": 0, "usd": 0.0, "evals": len(rows)},
                "limits": {"max_evals": len(candidates)}, "mode": MODE}

    def progress(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.snapshot())

    def finish(self, status: str, detail: str) -> RunOutcome:
        snapshot = self.snapshot()
        self.store.update_run(self.run_id, status=status, detail=detail, spend=snapshot["spend"])
        best = self.run.get("best_candidate")
        path = write_best(self.store, self.run_id, self.run_dir / BEST_FILE, best) if best else None
        return RunOutcome(self.run_id, self.run_dir, status, detail, best, self.run.get("best_speedup"), path,
                          snapshot=snapshot)
