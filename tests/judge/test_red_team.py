"""The red team: white-box attacks on the judge (bench/candidates/red_team), each written as an
attacker who has read all of kernelwright would write it against the judge before the runner /
checker split, and the unusual legitimate kernels that must still pass (bench/candidates/legit).

Every attack must fail. What failed it must be a check of every rule set (a failed trial, a
timed call's wrong output, tampering, work that changes when not watched, ...), or the attack is
judged under each rule set here. Attacks that need a GPU (`# needs: gpu`) run in the GPU tests.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.pool import JudgePool
from kernelwright.rules import NAMES, get

ROOT = Path(__file__).resolve().parents[2]
RED_TEAM = ROOT / "bench" / "candidates" / "red_team"
LEGIT = ROOT / "bench" / "candidates" / "legit"
# small and quick: five trials (every input variant), a handful of timed calls, no baselines
FAST = dict(trials=5, baselines=[], energy_ms=0.0, min_reps=5, max_reps=5, rep_ms=1.0, warmup_ms=1.0)
# checks of rejections that depend on the rule set (the others are in every set)
RULE_DEPENDENT = {"torch_work", "python_torch_ops", "extension_torch_ops", "extension_libraries"}


@dataclass
class Entry:
    path: Path
    problem: Path
    expect_pass: bool
    flags: list[str] = field(default_factory=list)
    gpu: bool = False
    rules: list[str] = field(default_factory=lambda: list(NAMES))

    @property
    def name(self) -> str:
        return self.path.stem


def read_entries(folder: Path) -> list[Entry]:
    entries = []
    for path in sorted(folder.glob("*.py")):
        text = path.read_text()
        problem = re.search(r"^# problem: (\S+)", text, re.M).group(1)
        expect = re.search(r"^# expect: (.*)$", text, re.M).group(1)
        flags = re.search(r"flags: (\S+)", expect)
        rules = re.search(r"^# rules: (.*)$", text, re.M)
        entries.append(Entry(path, _problem(problem), expect.startswith("pass"),
                             flags.group(1).split("|") if flags else [], bool(re.search(r"^# needs: gpu", text, re.M)),
                             rules.group(1).split(",") if rules else list(NAMES)))
    return entries


def _problem(name: str) -> Path:
    local = ROOT / name
    if local.is_file():
        return local
    return ROOT.parent / "shared" / "kernelbench" / name


ATTACKS = read_entries(RED_TEAM)
LEGITS = read_entries(LEGIT)


def reasons(verdict) -> set[str]:
    """Why a verdict failed: the check ids of its reject flags, "correctness" for a failed trial."""
    found = {f.check or f.code for f in verdict.reject_flags()}
    if any(not t.ok for t in verdict.trials):
        found.add("correctness")
    return found


def codes(verdict) -> set[str]:
    found = {f.code for f in verdict.reject_flags()}
    if any(not t.ok for t in verdict.trials):
        found.add("correctness")
    return found


def _jobs(entries: list[Entry], gpu: bool) -> list[tuple]:
    jobs = []
    for entry in entries:
        if entry.gpu and not gpu:
            continue
        needs_all = entry.expect_pass or bool(set(entry.flags) & {"torch_op", "observed_work"})
        for rules in (entry.rules if needs_all else ["kernelbench"]):
            jobs.append((entry, rules))
    return jobs


def judge_all(jobs: list[tuple], device: str) -> dict[tuple[str, str], object]:
    configs = [JudgeConfig(rules=rules, device=device, **FAST) for _, rules in jobs]
    with JudgePool(JudgeConfig(device=device, **FAST), cpu_workers=2) as pool:
        verdicts = pool.judge_many([(e.problem, e.path, c) for (e, _), c in zip(jobs, configs, strict=True)])
    return {(e.name, rules): v for (e, rules), v in zip(jobs, verdicts, strict=True)}


@pytest.fixture(scope="module")
def cpu_verdicts():
    return judge_all(_jobs(ATTACKS, gpu=False) + _jobs(LEGITS, gpu=False), "cpu")


def test_the_red_team_is_large_enough_and_well_formed():
    assert len(ATTACKS) >= 20
    assert all(not e.expect_pass and e.flags for e in ATTACKS)
    assert all(e.expect_pass for e in LEGITS) and len(LEGITS) >= 4
    assert all(e.problem.is_file() for e in ATTACKS + LEGITS)


@pytest.mark.parametrize("entry", [e for e in ATTACKS if not e.gpu], ids=lambda e: e.name)
def test_every_attack_fails_under_every_rule_set(entry, cpu_verdicts):
    judged = {rules: v for (name, rules), v in cpu_verdicts.items() if name == entry.name}
    for rules, verdict in judged.items():
        assert not verdict.passed, f"{entry.name} passed under {rules}: {verdict.error}"
        assert codes(verdict) & set(entry.flags), f"{entry.name} under {rules}: {codes(verdict)} {verdict.error}"
    if list(judged) == ["kernelbench"]:  # what failed it is a check of every rule set
        for reason in reasons(judged["kernelbench"]) - {"correctness"}:
            if reason not in RULE_DEPENDENT:
                assert all(reason in get(name).check_ids() for name in NAMES), reason
        assert reasons(judged["kernelbench"]) - RULE_DEPENDENT, judged["kernelbench"].error


@pytest.mark.parametrize("entry", [e for e in LEGITS if not e.gpu], ids=lambda e: e.name)
def test_unusual_legitimate_kernels_pass(entry, cpu_verdicts):
    for (name, rules), verdict in cpu_verdicts.items():
        if name == entry.name:
            assert verdict.passed, f"{name} under {rules}: {verdict.error} {[f.message for f in verdict.flags]}"
            assert verdict.timing is not None and verdict.timing.n >= 5


def test_a_killed_judge_is_not_what_an_attack_gets(cpu_verdicts):
    """kill_judge signals its parent and every kernelwright process: confined, it cannot; the
    checker judged every trial."""
    verdict = cpu_verdicts[("kill_judge", "kernelbench")]
    assert len(verdict.trials) >= 1 and not verdict.trials[0].ok
    assert verdict.process.exit_code == 0


@pytest.mark.gpu
@pytest.mark.parametrize("entry", [e for e in ATTACKS + LEGITS if e.gpu], ids=lambda e: e.name)
def test_gpu_red_team(entry):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    verdicts = judge_all(_jobs([entry], gpu=True), "cuda")
    for (_, rules), verdict in verdicts.items():
        if entry.expect_pass:
            assert verdict.passed, f"{entry.name} under {rules}: {verdict.error}"
        else:
            assert not verdict.passed and codes(verdict) & set(entry.flags), (rules, codes(verdict), verdict.error)
