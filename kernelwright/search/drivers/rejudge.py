"""Re-judge a run's stored candidates under another rule set, so one run reports a column per set.

    outcome = rejudge(RejudgeOptions(run="kw-runs/<run-id>", rules="strict"))

The candidates worth judging again are those whose stored verdict passed every correctness
trial: a candidate that failed a trial or did not build fails under every rule set, and is listed
as skipped with the reason. The judge settings are the run's own with only `rules` changed;
verdicts are stored per (candidate, rule set) beside the search's (`store.verdict(..., rules=)`).

Local evaluation needs the kind of device the run was judged on (a GPU run is not re-judged on a
CPU, whose shrunk sizes would not compare). `eval_mode="batch"` writes judge requests into
RUN_DIR/rejudge-<rules>/ for `kernelwright judge --batch` on a GPU machine; run the same command
again afterwards and the verdicts found there are stored.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kernelwright.judge.config import JudgeConfig
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling import batch_folder
from kernelwright.judge.scheduling.pool import JudgePool, visible_gpus
from kernelwright.judge.verdict import Verdict
from kernelwright.rules import get as get_rules
from kernelwright.store import RunStore, StoreError

from .session import RunError


@dataclass
class RejudgeOptions:
    run: str  # run folder or its run.sqlite
    rules: str
    eval_mode: str = "local"  # "local" or "batch"
    workers: int = 1
    time: bool = True  # False: correctness and rules only (no timing, no baselines)
    candidates: list[str] = field(default_factory=list)  # only these ids (default: every eligible one)


@dataclass
class RejudgeOutcome:
    run_id: str
    rules: str
    judged: dict[str, str] = field(default_factory=dict)  # candidate -> status under `rules`
    skipped: dict[str, str] = field(default_factory=dict)  # candidate -> why it was not judged again
    pending: list[Path] = field(default_factory=list)  # batch requests still waiting for a verdict
    folder: Path | None = None


def eligible(store, run_id: str, rules: str, only: list[str] | None = None) -> tuple[list[dict], dict[str, str]]:
    """(candidate rows to judge under `rules`, {candidate id: why not} for the others)."""
    chosen, skipped = [], {}
    done = {(r["candidate_id"], r["rules"]) for r in store.verdict_rows(run_id)}
    for row in store.candidates(run_id):
        cid = row["id"]
        if only and cid not in only:
            continue
        verdict = store.verdict(run_id, cid)
        if not row.get("code") or verdict is None:
            continue  # the reference node, or never evaluated
        if (cid, rules) in done:
            skipped[cid] = f"already judged under {rules}"
        elif not _correct(verdict):
            skipped[cid] = f"{verdict.get('status')} in stage {verdict.get('stage')} under " \
                           f"{verdict.get('rules') or 'the search rules'}: not correct, so not under any rule set"
        else:
            chosen.append(row)
    return chosen, skipped


def _correct(verdict: dict) -> bool:
    trials = verdict.get("trials") or []
    return bool(trials) and all(t.get("ok") for t in trials) and (verdict.get("compile") or {}).get("ok", True)


def judge_config(run: dict, rules: str, time: bool) -> JudgeConfig:
    config = JudgeConfig.from_dict((run.get("settings") or {}).get("judge") or {})
    config = dataclasses.replace(config, rules=get_rules(rules).name)
    return config if time else dataclasses.replace(config, time=False, baselines=(), energy_ms=0.0)


def rejudge(options: RejudgeOptions, log: Callable[[str], None] = print) -> RejudgeOutcome:
    path = Path(options.run)
    try:
        store = RunStore(path, create=False) if path.is_file() else RunStore.in_dir(path, create=False)
    except StoreError as exc:
        raise RunError(str(exc)) from None
    with store:
        run = store.run()
        config = judge_config(run, options.rules, options.time)
        rows, skipped = eligible(store, run["id"], config.rules, options.candidates)
        outcome = RejudgeOutcome(run["id"], config.rules, skipped=skipped)
        if options.eval_mode == "batch":
            _batch(store, run, rows, config, store.path.parent, outcome, log)
        elif options.eval_mode == "local":
            _local(store, run, rows, config, options.workers, outcome, log)
        else:
            raise RunError(f"--eval must be local or batch, not {options.eval_mode!r}")
    return outcome


def _problem(run: dict):
    return SourceText(run["problem_source"], name=f"{run['problem_name']}.py")


def _check_device(store, run: dict, rows: list[dict], config: JudgeConfig) -> None:
    import torch  # noqa: PLC0415 -- search/drivers/ stay torch-free at import (the CLI loads them per command; torch takes 1-2 s): loaded to ask whether this machine has a GPU

    devices = {(store.verdict(run["id"], r["id"]) or {}).get("device", "") for r in rows}
    if any(str(d).startswith("cuda") for d in devices) and config.device != "cpu" and not torch.cuda.is_available():
        raise RunError("this run was judged on a GPU and this machine has none: re-judge with --eval batch and "
                       "run `kernelwright judge --batch FOLDER` where the GPU is")


def _local(store, run: dict, rows: list[dict], config: JudgeConfig, workers: int, outcome: RejudgeOutcome,
           log: Callable[[str], None]) -> None:
    if not rows:
        return
    _check_device(store, run, rows, config)
    gpus = visible_gpus() if config.device != "cpu" else ()
    jobs = [(_problem(run), SourceText(row["code"], name=row["id"]), config) for row in rows]
    with JudgePool(config, gpus=gpus, cpu_workers=max(1, workers)) as pool:
        for index, verdict in pool.iter_judge(jobs):
            _store(store, run["id"], rows[index]["id"], verdict, outcome, log)


def _batch(store, run: dict, rows: list[dict], config: JudgeConfig, run_dir: Path, outcome: RejudgeOutcome,
           log: Callable[[str], None]) -> None:
    folder = run_dir / f"rejudge-{config.rules}"
    outcome.folder = folder
    found = batch_folder.read_verdicts(folder) if folder.is_dir() else {}
    for row in rows:
        verdict = found.get(row["id"])
        if verdict is not None:
            _store(store, run["id"], row["id"], verdict, outcome, log)
            continue
        request = folder / f"{row['id']}{batch_folder.REQUEST_SUFFIX}"
        if not request.is_file():
            request = batch_folder.write_request(folder, row["id"], _problem(run), row["code"], config)
        outcome.pending.append(request)


def _store(store, run_id: str, candidate_id: str, verdict: Verdict, outcome: RejudgeOutcome,
           log: Callable[[str], None]) -> None:
    store.save_verdict(run_id, candidate_id, verdict.to_dict())
    outcome.judged[candidate_id] = verdict.status
    log(f"{candidate_id}: {verdict.status} under {verdict.rules or outcome.rules}")
