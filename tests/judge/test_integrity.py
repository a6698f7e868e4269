"""Judge integrity (issue 20), end to end on the CPU: a correct candidate that attacks the judge while
it is imported -- writes outside its scratch folder, into the judge's package, into a cached
baseline, into its supervisor's record; reads another candidate's scratch; signals its supervisor;
leaves a `setsid` child and a daemon running -- is blocked or caught on every count, and the
next legitimate candidate's verdict, baseline and timing come out as before the attack.

Every attack is judged twice: each evaluation started cold (a fresh interpreter) and warm (forked
from the fork server, judge/scheduling/forkserver.py); the guarantees are the same.

The judge runs from a copy of the package (PYTHONPATH), so an attack that got through would change
the copy, never this repository. The same attacks on a GPU: tests/judge/test_gpu_integrity.py.
"""
from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig, trusted
from kernelwright.judge.api import judge, warm_launcher
from kernelwright.judge.confine import landlock_abi
from kernelwright.judge.verdict import ERROR, FAIL, PASS, REJECT, Verdict

sys.path.insert(0, str(Path(__file__).parent))
from integrity_attacks import (ALL_ATTACKS, LEGIT, PROBLEM, alive, attacker, children, outcomes,  # noqa: E402
                               package_copy)

needs_landlock = pytest.mark.skipif(landlock_abi()[0] < 1, reason=f"no Landlock here: {landlock_abi()[1]}")
FAST = dict(trials=2, rules="kernelbench", device="cpu", time=True, baselines=("eager",),
            warmup_ms=1.0, rep_ms=5.0, min_reps=3)


@dataclass
class Arena:
    root: Path
    package: Path  # the copy the judge imports
    cache: Path
    outside: Path
    secret: Path
    before: Verdict  # a legitimate candidate, judged first
    attacked: Verdict
    after: Verdict  # the same legitimate candidate, judged after the attack
    package_digest_before: str
    records_before: dict[str, bytes]
    start: str = "cold"  # how every evaluation was started: "cold" or "warm"


def _digest(folder: Path) -> str:
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts):
        sha.update(str(path.relative_to(folder)).encode() + path.read_bytes())
    return sha.hexdigest()


def _records(cache: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((cache / "baselines").glob("*.json"))}


def _judge_all(root: Path, config: JudgeConfig, attacks, launcher=None) -> tuple:
    env = {"PYTHONPATH": str(root / "pkg")}
    scratch_root = root / "scratch"
    before = judge(PROBLEM, LEGIT, config, env=env, scratch_root=scratch_root, launcher=launcher)
    digest, records = _digest(root / "pkg" / "kernelwright"), _records(Path(config.cache_dir))
    candidate = attacker(root / "outside" / "pwned.txt", Path(config.cache_dir) / "baselines",
                         scratch_root / "kw-judge-other" / "secret.txt", attacks)
    attacked = judge(PROBLEM, candidate, config, env=env, scratch_root=scratch_root, launcher=launcher)
    return before, attacked, digest, records


def _setup(root: Path) -> None:
    package_copy(root / "pkg")
    (root / "outside").mkdir()
    other = root / "scratch" / "kw-judge-other"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another candidate's kernel")


@pytest.fixture(scope="module", params=["cold", "warm"])
def arena(tmp_path_factory, request) -> Arena:
    root = tmp_path_factory.mktemp(f"integrity_{request.param}")
    _setup(root)
    config = JudgeConfig(cache_dir=str(root / "cache"), **FAST)
    env = {"PYTHONPATH": str(root / "pkg")}
    os.environ["KW_TEST_API_KEY"] = "not-for-candidates"  # the judging process holds a credential
    launcher = warm_launcher(config, force=True, env=env) if request.param == "warm" else None
    try:
        before, attacked, digest, records = _judge_all(root, config, ALL_ATTACKS, launcher)
        after = judge(PROBLEM, LEGIT, config, env=env, scratch_root=root / "scratch", launcher=launcher)
    finally:
        del os.environ["KW_TEST_API_KEY"]
        if launcher is not None:
            launcher.close()
    return Arena(root, root / "pkg" / "kernelwright", root / "cache", root / "outside" / "pwned.txt",
                 root / "scratch" / "kw-judge-other" / "secret.txt", before, attacked, after, digest, records,
                 start=request.param)


def test_every_evaluation_started_as_the_arena_asked(arena):
    for verdict in (arena.before, arena.attacked, arena.after):
        assert verdict.process.isolation["start"].startswith(f"{arena.start}:"), verdict.process.isolation["start"]


@needs_landlock
def test_the_attacker_is_judged_confined_and_passes_as_the_correct_candidate_it_is(arena):
    assert arena.before.status == PASS, arena.before.error
    assert arena.attacked.status == PASS, arena.attacked.error
    info = arena.attacked.process
    assert info.confined and info.isolation["confinement"]["mechanism"].startswith("landlock")
    assert "filesystem isolation" not in info.isolation["not_enforced"]
    assert not [f for f in arena.attacked.flags if f.code in ("unconfined", "tampering")]


@needs_landlock
def test_writing_outside_the_scratch_folder_is_refused(arena):
    assert outcomes(arena.attacked.process.stdout_tail)["write_outside"].startswith("blocked: PermissionError")
    assert not arena.outside.exists()


@needs_landlock
def test_writing_into_the_judge_package_is_refused(arena):
    seen = outcomes(arena.attacked.process.stdout_tail)
    assert seen["write_package"].startswith("blocked: PermissionError")
    assert seen["plant_module"].startswith("blocked: PermissionError")
    assert _digest(arena.package) == arena.package_digest_before
    assert not (arena.package / "judge" / "planted.py").exists()


@needs_landlock
def test_appending_to_a_cached_baseline_is_refused(arena):
    assert arena.records_before, "the first legitimate candidate should have cached its baseline"
    assert outcomes(arena.attacked.process.stdout_tail)["append_baseline"].startswith("blocked: PermissionError")
    assert _records(arena.cache) == arena.records_before


@needs_landlock
def test_the_supervisors_record_cannot_be_forged(arena):
    assert outcomes(arena.attacked.process.stdout_tail)["forge_record"].startswith("blocked: PermissionError")
    assert arena.attacked.process.isolation["confinement"]["active"] is True


@needs_landlock
def test_another_candidates_scratch_folder_is_unreadable(arena):
    assert outcomes(arena.attacked.process.stdout_tail)["read_other_scratch"].startswith("blocked: PermissionError")


@needs_landlock
def test_signalling_the_supervisor_is_refused(arena):
    assert outcomes(arena.attacked.process.stdout_tail)["signal_supervisor"].startswith("blocked: PermissionError")


def test_processes_left_behind_in_other_sessions_are_killed_and_counted(arena):
    pids = children(arena.attacked.process.stdout_tail)
    assert len(pids) == 2
    assert not [pid for pid in pids if alive(pid)]
    assert arena.attacked.process.killed_processes == 2
    assert "killed 2 of the candidate's" in arena.attacked.process.isolation["descendants"]


def test_the_next_legitimate_candidate_is_judged_as_before(arena):
    before, after = arena.before, arena.after
    assert after.status == PASS and after.process.killed_processes == 0
    assert not [f for f in after.flags if f.severity == REJECT or f.code == "judge_note"]
    assert after.baselines.cached and after.baselines.eager == before.baselines.eager
    assert after.timing is not None and after.speedup["eager"] > 0
    assert _records(arena.cache) == arena.records_before


def test_the_candidate_environment_names_no_cache_no_parent_and_no_credential(arena):
    assert outcomes(arena.attacked.process.stdout_tail)["read_environment"] == "done: []"


# ---------------------------------------------------------------- without confinement: caught


def test_an_unconfined_candidate_that_tampers_is_failed_and_stops_the_judge(tmp_path, monkeypatch):
    """config.confine=False: the writes get through; the check after the evaluation fails the
    candidate, removes the changed baseline record and refuses further judging; its children are
    killed all the same."""
    monkeypatch.setattr(trusted, "_COMPROMISED", [])
    _setup(tmp_path)
    config = JudgeConfig(cache_dir=str(tmp_path / "cache"), confine=False, **FAST)
    before, attacked, _, records = _judge_all(tmp_path, config, ("write_package", "append_baseline",
                                                                 "leave_children"))
    assert before.status == PASS and records
    assert not before.process.confined and [f for f in before.flags if f.code == "unconfined"]
    seen = outcomes(attacked.process.stdout_tail)
    assert seen["write_package"].startswith("done") and seen["append_baseline"].startswith("done")
    assert attacked.status == FAIL
    tampering = [f for f in attacked.flags if f.code == "tampering"]
    assert tampering and "check.py" in tampering[0].message and "baselines" in tampering[0].message
    assert _records(tmp_path / "cache") == {}  # the appended record was invalidated
    assert attacked.process.killed_processes == 2
    assert not [pid for pid in children(attacked.process.stdout_tail) if alive(pid)]
    refused = judge(PROBLEM, LEGIT, config, env={"PYTHONPATH": str(tmp_path / "pkg")},
                    scratch_root=tmp_path / "scratch")
    assert refused.status == ERROR and "judges no more" in refused.error


HANGS_AFTER_LEAVING_A_CHILD = '''
# hand-written test candidate: leaves a setsid child, then hangs in forward
import subprocess, sys, time
import torch.nn as nn

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print(f"CHILD {child.pid}", flush=True)


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(600)
'''


@pytest.mark.parametrize("start", ["cold", "warm"])
def test_at_a_time_limit_the_candidates_processes_are_killed_too(tmp_path, start):
    from kernelwright.judge.request import SourceText

    # 10 s: the candidate hangs in its first trial whatever the limit; 3 s let a busy machine time out
    # the judge's own stages before it (an `error` verdict, in a full run beside other work)
    config = JudgeConfig(cache_dir=str(tmp_path / "cache"), **{**FAST, "timeout_s": 10.0, "time": False})
    launcher = warm_launcher(config, force=True) if start == "warm" else None
    try:
        verdict = judge(PROBLEM, SourceText(HANGS_AFTER_LEAVING_A_CHILD, "hangs"), config, scratch_root=tmp_path,
                        launcher=launcher)
    finally:
        if launcher is not None:
            launcher.close()
    assert verdict.process.isolation["start"].startswith(f"{start}:")
    assert verdict.status == FAIL and verdict.process.timed_out and "timed out in the check stage" in verdict.error
    pids = children(verdict.process.stdout_tail)
    assert len(pids) == 1 and not alive(pids[0])
    assert verdict.process.killed_processes == 1
