"""Short-term memory: the run's trajectory, dead ends, and the prompt digest."""
from __future__ import annotations

import json

import pytest

from kernelwright.memory.trajectory import Trajectory, TrajectoryEntry, approach_id, approach_key

# All entries below are hand-written test data, not results of a real run.


def entry(cid, outcome, key="", plan="try something", speedup=None, reason="", action="improve", parent="c0"):
    return TrajectoryEntry(candidate_id=cid, parent_id=parent, action=action, plan=plan, approach_key=key,
                           outcome=outcome, speedup=speedup, reason=reason)


def test_labels_are_kept_whole_and_compared_loosely():
    long = "1. Use a Triton kernel with float4 loads for the ReLU, BLOCK=4096 and 8 warps, masked tail!"
    assert approach_key(long + "\nmore text") == long[3:]  # bullet stripped, nothing cut
    assert approach_key("## Write custom kernel\n") == "Write custom kernel"
    assert approach_key("\n\n") == "unspecified"
    assert approach_id("Fuse bias + ReLU into the GEMM.") == approach_id("fuse bias relu into the gemm")


def test_entry_keeps_the_label_and_validates():
    e = entry("c1", "pass", plan="Fuse bias and ReLU into the GEMM epilogue")
    assert e.approach_key == "Fuse bias and ReLU into the GEMM epilogue"
    assert entry("c2", "pass", key="  retune   BLOCK_M ").approach_key == "retune BLOCK_M"
    with pytest.raises(ValueError, match="outcome"):
        entry("c1", "great")
    with pytest.raises(ValueError, match="action"):
        entry("c1", "pass", action="guess")
    with pytest.raises(ValueError, match="candidate_id"):
        entry("", "pass")
    with pytest.raises(ValueError, match="plan must be a string"):
        entry("c1", "pass", plan=None)
    for bad in (float("nan"), -1.0, 0.0, True, "2x"):
        with pytest.raises(ValueError, match="speedup"):
            entry("c1", "faster", speedup=bad)


def test_add_rejects_duplicate_candidates_and_already_tried():
    trajectory = Trajectory([entry("c1", "wrong", key="split-k")])
    with pytest.raises(ValueError, match="already"):
        trajectory.add(entry("c1", "pass"))
    assert trajectory.already_tried("split-k") and trajectory.already_tried(" Split-K ")
    assert not trajectory.already_tried("vectorized-access")


def test_dead_ends():
    trajectory = Trajectory([
        entry("c1", "wrong", key="a"), entry("c2", "compile_error", key="a"),       # failed twice
        entry("c3", "wrong", key="b"),                                              # failed once
        entry("c4", "slower", key="c", speedup=0.7),                                # slower
        entry("c5", "wrong", key="d"), entry("c6", "crash", key="d"),
        entry("c7", "faster", key="d", speedup=1.4, action="repair"),               # failed, then worked
    ])
    assert sorted(trajectory.dead_ends()) == ["a", "c"]
    assert trajectory.best().candidate_id == "c7"


def test_the_approach_of_the_best_candidate_is_never_a_dead_end():
    # a first version that is correct but slower than eager is still the best there is
    trajectory = Trajectory([entry("c1", "slower", key="one fused kernel", speedup=0.43, action="draft"),
                             entry("c2", "wrong", key="tiled two-pass kernel"),
                             entry("c3", "wrong", key="tiled two-pass kernel")])
    assert trajectory.dead_ends() == ["tiled two-pass kernel"]
    assert "`one fused kernel` (c1): no gain, best 0.43×" in trajectory.digest()
    trajectory.add(entry("c4", "faster", key="retune blocks", speedup=0.9))
    trajectory.add(entry("c5", "slower", key="ONE fused kernel!", speedup=0.4))  # the same idea, again no gain
    assert sorted(trajectory.dead_ends()) == ["one fused kernel", "tiled two-pass kernel"]
    assert trajectory.is_dead_end("One Fused Kernel") and not trajectory.is_dead_end("retune blocks")


def test_digest_groups_failures_and_puts_best_success_first():
    trajectory = Trajectory([
        entry("c1", "wrong", key="tf32-dot", reason="max abs err 3e-2"),
        entry("c2", "wrong", key="tf32-dot", reason="max abs err 4e-2"),
        entry("c3", "wrong", key="tf32-dot", reason="max abs err 5e-2 at K=8192"),
        entry("c4", "faster", key="epilogue-fusion", speedup=1.3),
        entry("c5", "faster", key="swizzle", speedup=2.1),
        entry("c6", "compile_error", key="tma", reason="make_tensor_descriptor\n  not found"),
    ])
    digest = trajectory.digest(max_items=10, max_chars=2000)
    lines = [line for line in digest.splitlines() if line.startswith("- ")]
    assert lines[0].startswith("- `swizzle`") and "2.10×" in lines[0]
    assert lines[1].startswith("- `epilogue-fusion`")
    tf32 = [line for line in lines if "tf32-dot" in line]
    assert len(tf32) == 1 and "wrong ×3" in tf32[0] and "DEAD END" in tf32[0]
    assert "improved" in lines[0]  # outcomes in words
    assert "K=8192" in tf32[0], "the latest failure reason is the one shown"
    assert "make_tensor_descriptor not found" in digest, "reasons are flattened to one line"


def test_digest_respects_item_and_char_limits():
    trajectory = Trajectory(entry(f"c{i}", "wrong", key=f"idea-{i}", reason="x" * 300) for i in range(30))
    short = trajectory.digest(max_items=3, max_chars=5000)
    assert sum(line.startswith("- `") for line in short.splitlines()) == 3
    assert "27 more" in short
    for budget in (120, 400, 1000):
        text = trajectory.digest(max_items=100, max_chars=budget)
        assert len(text) <= budget
    assert "…" in trajectory.digest(max_items=1, max_chars=5000), "long reasons are truncated"


def test_digest_of_empty_trajectory_or_tiny_budget_is_empty():
    assert Trajectory().digest() == ""
    assert Trajectory([entry("c1", "pass")]).digest(max_chars=10) == ""
    assert Trajectory([entry("c1", "pass")]).digest(max_items=0) == ""


def test_round_trip_through_json():
    trajectory = Trajectory([
        entry("c1", "faster", key="split-k", speedup=1.5, action="draft", parent=None),
        entry("c2", "timeout", plan="Persistent kernel over tiles", reason="ran past 60 s"),
    ])
    rows = json.loads(json.dumps(trajectory.to_dicts()))
    again = Trajectory.from_dicts(rows)
    assert again.entries == trajectory.entries
    assert again.digest() == trajectory.digest()


def test_from_dicts_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown trajectory entry keys"):
        Trajectory.from_dicts([{"candidate_id": "c1", "parent_id": None, "action": "draft", "plan": "",
                                "colour": "red"}])
    with pytest.raises(ValueError, match="must be a dict"):
        Trajectory.from_dicts(["c1"])


def test_a_repeat_of_earlier_code_counts_toward_a_dead_end_but_not_against_a_win():
    repeated = Trajectory([entry("c1", "wrong", key="split rows", reason="max abs error 0.5"),
                           entry("c2", "duplicate", key="split rows", reason="duplicate of c1")])
    assert repeated.dead_ends() == ["split rows"]
    assert "same code as an earlier candidate" in repeated.digest()
    won = Trajectory([entry("c1", "faster", key="fuse", speedup=1.5), entry("c2", "duplicate", key="fuse"),
                      entry("c3", "duplicate", key="fuse")])
    assert won.dead_ends() == [] and "worked, best 1.50×" in won.digest()


def test_a_dead_end_carries_its_time_and_cause():
    """Dead ends say which candidates, how fast they ran and why they count as dead (issue 31)."""
    slower = TrajectoryEntry("c5", "c2", "improve", "p", "split the rows", "slower", 0.95,
                             "c5 ran 1.31 ms per call (0.95x), not faster than c2 (1.22 ms, 1.02x)", time_ms=1.31)
    failed = [entry("c6", "wrong", key="tf32 dots", reason="trial 1 (signed inputs): rel L2 3e-4 > 1e-4"),
              entry("c7", "wrong", key="tf32 dots", reason="trial 1 (signed inputs): rel L2 2.9e-4 > 1e-4")]
    best = entry("c2", "faster", key="one program per row", speedup=1.02, action="draft")
    digest = Trajectory([best, slower, *failed]).digest()
    assert ("- `split the rows` (c5): DEAD END (no gain, best 0.95× (1.31 ms)); why: c5 ran 1.31 ms per call "
            "(0.95x), not faster than c2 (1.22 ms, 1.02x)") in digest
    assert "- `tf32 dots` (c6, c7): DEAD END (wrong ×2); why: trial 1 (signed inputs): rel L2 2.9e-4 > 1e-4" in digest
    with pytest.raises(ValueError, match="time_ms"):
        TrajectoryEntry("c8", "c2", "improve", "p", "x", "faster", 1.2, time_ms=-1.0)
