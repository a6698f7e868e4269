"""The verdict record's JSON round trip: every field read back as written, the located fault included."""
from __future__ import annotations

import pytest

from kernelwright.judge.verdict import SCHEMA_VERSION, FAIL, Flag, TrialResult, Verdict


def test_a_failed_verdict_with_a_located_fault_round_trips():
    verdict = Verdict(problem="p", candidate="c", status=FAIL, stage="check", error="illegal memory access",
                      trials=[TrialResult(trial=0, seed=42, variant="signed", ok=False, message="boom")],
                      flags=[Flag("judge_note", "info", "n")],
                      fault={"tool": "CUDA_LAUNCH_BLOCKING=1", "kernel": "k", "where": "line 3 of c.py: `k[g](x)`",
                             "report": "RuntimeError: ..."})
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict and again.fault["kernel"] == "k"
    assert Verdict.from_dict({"problem": "p", "candidate": "c", "schema_version": SCHEMA_VERSION}).fault == {}


def test_an_unknown_schema_is_refused():
    with pytest.raises(ValueError, match="schema version"):
        Verdict.from_dict({"problem": "p", "candidate": "c", "schema_version": SCHEMA_VERSION + 1})
