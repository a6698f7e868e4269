"""The reference store (judge/refstore.py, refcases.py, stages/reference.py): a problem's reference
outputs are computed once per settings and shared by every later candidate, which is judged the same;
no candidate can change what the next one is compared against; a bad entry is never used."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from kernelwright.judge import JudgeConfig, refcases, refstore
from kernelwright.judge.api import judge
from kernelwright.judge.check import TrialCase

sys.path.insert(0, str(Path(__file__).parent))
from test_supervisor import _supervisor  # noqa: E402

CANDIDATES = Path(__file__).parent / "candidates"
RELU = "level1/19_ReLU.py"
FAST = dict(trials=2, device="cpu", time=False, overrides={"batch_size": 4, "dim": 4096},
            reference_cache_min_compute_s=0.0)  # these tiny references are stored, to test the store


# ----------------------------------------------------------------------------- the store itself


def _staged(folder: Path, data: bytes = b"x" * 1000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cases.pt"
    path.write_bytes(data)
    return path


def test_an_entry_is_published_whole_and_found_verified(tmp_path):
    work = tmp_path / "work"
    reply = refstore.publish(tmp_path / "cache", "k1", _staged(work), [work], 1 << 20, 1 << 30)
    assert reply["stored"] and reply["bytes"] == 1000
    found = refstore.lookup(tmp_path / "cache", "k1")
    assert found.path is not None and found.path.read_bytes() == b"x" * 1000
    assert not os.access(found.path, os.W_OK) or os.geteuid() == 0  # published read-only
    assert refstore.lookup(tmp_path / "cache", "k2").why == "absent"
    assert not list((tmp_path / "cache" / "references").glob(".tmp-*"))


@pytest.mark.parametrize("damage", ["flip", "truncate", "manifest", "remove"])
def test_a_corrupted_partial_or_tampered_entry_is_discarded(tmp_path, damage):
    work = tmp_path / "work"
    refstore.publish(tmp_path / "cache", "k1", _staged(work), [work], 1 << 20, 1 << 30)
    entry = tmp_path / "cache" / "references" / "k1"
    data = entry / refstore.DATA_FILE
    data.chmod(0o644)
    if damage == "flip":
        data.write_bytes(b"y" + b"x" * 999)  # same size, other bytes
    elif damage == "truncate":
        data.write_bytes(b"x" * 500)
    elif damage == "manifest":
        (entry / refstore.MANIFEST).write_text("{")
    else:
        data.unlink()
    found = refstore.lookup(tmp_path / "cache", "k1")
    assert found.path is None and found.why.startswith("entry discarded")
    assert not entry.exists()  # removed: the next evaluation computes and stores it again


def test_an_untouched_entry_is_not_read_through_but_one_written_since_is(tmp_path, monkeypatch):
    """A hit whose data file has the fingerprint recorded at publishing skips the full digest; a
    write that keeps size and modification time (set back with utime) still changes the status-change
    time, so the entry is digested whole and, its bytes changed, discarded."""
    work = tmp_path / "work"
    refstore.publish(tmp_path / "cache", "k1", _staged(work), [work], 1 << 20, 1 << 30)
    digested = []
    real_digest = refstore.digest
    monkeypatch.setattr(refstore, "digest", lambda path: digested.append(path) or real_digest(path))
    assert refstore.lookup(tmp_path / "cache", "k1").path is not None and digested == []
    data = tmp_path / "cache" / "references" / "k1" / refstore.DATA_FILE
    before = data.stat()
    data.chmod(0o644)
    data.write_bytes(b"y" * 1000)  # same size
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))  # modification time set back
    found = refstore.lookup(tmp_path / "cache", "k1")
    assert digested and found.path is None and "digest" in found.why


def test_the_store_refuses_files_outside_the_workers_folders_links_and_oversize(tmp_path):
    work, other = tmp_path / "work", tmp_path / "other"
    outside = _staged(other)
    with pytest.raises(refstore.ReferenceStoreError, match="own folders"):
        refstore.publish(tmp_path / "cache", "k", outside, [work], 1 << 20, 1 << 30)
    work.mkdir()
    (work / "link.pt").symlink_to(outside)
    with pytest.raises(refstore.ReferenceStoreError, match="link"):
        refstore.publish(tmp_path / "cache", "k", work / "link.pt", [work], 1 << 20, 1 << 30)
    with pytest.raises(refstore.ReferenceStoreError, match="above the cap"):
        refstore.publish(tmp_path / "cache", "k", _staged(work), [work], 999, 1 << 30)


def test_misses_are_counted_per_key_and_forgotten_after_a_week(tmp_path):
    cache = tmp_path / "cache"
    assert [refstore.lookup(cache, "k1").missed_before for _ in range(3)] == [0, 1, 2]
    assert refstore.lookup(cache, "k2").missed_before == 0 and refstore.lookup(cache, "k2").to_reply()["missed_before"] == 1
    count = cache / "references" / f"{refstore.MISSED}k1"
    os.utime(count, (0, 0))  # not asked for in a week
    refstore.evict(cache, 1 << 30)
    assert not count.exists() and refstore.lookup(cache, "k1").missed_before == 0
    assert refstore.evict(cache, 0) == []  # the counts are not entries


def test_the_store_keeps_to_its_total_cap_least_recently_used_first(tmp_path):
    work, cache = tmp_path / "work", tmp_path / "cache"
    for key in ("a", "b"):
        refstore.publish(cache, key, _staged(work), [work], 1 << 20, 1 << 30)
    manifest_a = cache / "references" / "a" / refstore.MANIFEST
    os.utime(manifest_a, (1, 1))  # "a" used long ago ...
    assert refstore.lookup(cache, "a").path is not None  # ... until now: "b" is the oldest
    reply = refstore.publish(cache, "c", _staged(work), [work], 1 << 20, 3500)  # room for two entries
    assert reply["evicted"] == ["b"]
    assert sorted(p.name for p in (cache / "references").iterdir()) == ["a", "c"]


def test_the_supervisor_answers_one_lookup_and_one_store_only_before_the_seal(tmp_path):
    sup = _supervisor(tmp_path, "evaluate")
    assert sup._store_references({"path": "x"})["error"]  # no lookup yet
    assert sup._references({"fields": {"seed": 1}})["hit"] is False
    assert "one lookup" in sup._references({"fields": {"seed": 2}})["error"]
    assert sup._seal({"overrides": {}, "device": "cpu"}) == {"ok": True}
    assert "before the candidate" in sup._store_references({"path": "x"})["error"]  # after the seal
    (tmp_path / "late").mkdir()
    late = _supervisor(tmp_path / "late", "evaluate")
    late._seal({"overrides": {}, "device": "cpu"})
    assert "before the candidate" in late._references({"fields": {}})["error"]


def test_the_key_changes_with_every_setting_the_references_depend_on():
    class Problem:  # the two fields of a loaded problem the key reads
        overrides, shrunk = {"n": 4}, False

    def key(problem=Problem, source="x", device_name="cpu:x", **settings):
        config = JudgeConfig(**{"trials": 3, "seed": 42, **settings})
        return refstore.key_of(refcases.key_fields(source, problem, config, "cpu", device_name, {"tf32": False}))

    class Bigger(Problem):
        overrides = {"n": 8}

    base = key()
    assert base == key()
    others = [key(problem=Bigger), key(source="y"), key(device_name="NVIDIA H100"), key(seed=1), key(trials=4),
              key(rules="strict"), key(allow_tf32=True)]
    assert base not in others and len(set(others)) == len(others)


# ----------------------------------------------------------------------------- entries


def _case(index: int, n: int = 8) -> TrialCase:
    out = torch.arange(n, dtype=torch.float32) + index
    return TrialCase(index, 42 + index, "given", [out], ref_inputs={0: out * 2},
                     ref_grads={"input 0": out - 1})


def test_an_entry_reads_back_mapped_and_a_write_to_it_stays_in_this_process(tmp_path):
    refs = refcases.References(cases=[_case(0), _case(1)], refill=_case(2), ref_mutates=[0],
                               ref_ops={"aten::relu": 1}, launches={}, inputs_on_device=None)
    path = tmp_path / "cases.pt"
    refcases.save(refcases.payload(refs), path)
    before = path.read_bytes()
    back = refcases.place(refcases.read(path), "cpu")
    assert [c.seed for c in back.cases] == [42, 43] and back.refill.index == 2
    assert torch.equal(back.cases[1].ref_outputs[0], refs.cases[1].ref_outputs[0])
    assert torch.equal(back.cases[0].ref_inputs[0], refs.cases[0].ref_inputs[0])
    assert back.ref_mutates == [0] and back.ref_ops == {"aten::relu": 1}
    back.cases[0].ref_outputs[0].zero_()  # private pages: the file is untouched
    assert path.read_bytes() == before
    assert torch.equal(refcases.place(refcases.read(path), "cpu").cases[0].ref_outputs[0], refs.cases[0].ref_outputs[0])


# ----------------------------------------------------------------------------- end to end (sandboxed, CPU)


def _judge(kernelbench, candidate: str, cache: Path, **settings):
    config = JudgeConfig(**{**FAST, "cache_dir": str(cache), **settings})
    return judge(kernelbench / RELU, CANDIDATES / f"{candidate}.py", config)


def _trials(verdict) -> list[tuple]:
    return [(t.trial, t.seed, t.variant, t.ok, t.message, t.max_abs_err, t.rel_l2_err) for t in verdict.trials]


def test_later_candidates_of_a_problem_read_the_references_and_are_judged_the_same(kernelbench, tmp_path):
    cache = tmp_path / "cache"
    first = _judge(kernelbench, "relu_wrong", cache)
    again = _judge(kernelbench, "relu_wrong", cache)
    assert first.reference["cache"]["hit"] is False and first.reference["cache"]["stored"] is True
    assert again.reference["cache"] == {**again.reference["cache"], "hit": True, "key": first.reference["cache"]["key"]}
    assert _trials(again) == _trials(first) and again.status == first.status and again.error == first.error
    assert again.reference["compute_ops"] == first.reference["compute_ops"]
    assert "reference_store" not in again.stage_seconds
    other = _judge(kernelbench, "relu_correct", cache)
    assert other.status == "pass" and other.reference["cache"]["hit"] is True
    for changed in ({"seed": 7}, {"rules": "strict"}, {"overrides": {"batch_size": 4, "dim": 2048}}):
        missed = _judge(kernelbench, "relu_correct", cache, **changed)
        assert missed.reference["cache"]["hit"] is False, changed
        assert missed.reference["cache"]["key"] != first.reference["cache"]["key"]


def test_a_candidate_that_writes_into_everything_cannot_change_what_the_next_one_gets(kernelbench, tmp_path):
    cold = _judge(kernelbench, "relu_correct", tmp_path / "fresh")  # the reference: judged without a store
    cache = tmp_path / "cache"
    _judge(kernelbench, "relu_correct", cache)  # stores the entry
    entry = next((cache / "references").iterdir())
    stored = (entry / refstore.DATA_FILE).read_bytes()
    for attacker in ("relu_mutate", "relu_overwrite_all"):  # its inputs; every tensor in its process
        attacked = _judge(kernelbench, attacker, cache)
        assert attacked.reference["cache"]["hit"] is True and attacked.status != "pass"
    assert (entry / refstore.DATA_FILE).read_bytes() == stored
    after = _judge(kernelbench, "relu_correct", cache)
    assert after.reference["cache"]["hit"] is True and after.status == "pass"
    assert _trials(after) == _trials(cold)


def test_a_tampered_entry_is_not_used_and_is_computed_again(kernelbench, tmp_path):
    cache = tmp_path / "cache"
    first = _judge(kernelbench, "relu_correct", cache)
    data = next((cache / "references").iterdir()) / refstore.DATA_FILE
    payload = torch.load(data, weights_only=True)
    payload["cases"][0]["ref_outputs"][0].zero_()  # a well-formed entry whose answers are wrong
    data.chmod(0o644)
    torch.save(payload, data)
    again = _judge(kernelbench, "relu_correct", cache)
    record = again.reference["cache"]
    assert record["hit"] is False and ("digest" in record["why"] or "bytes" in record["why"]), record
    assert record["stored"] is True and again.status == "pass" and _trials(again) == _trials(first)
    assert _judge(kernelbench, "relu_correct", cache).reference["cache"]["hit"] is True


def test_references_computed_faster_than_the_threshold_are_stored_only_when_asked_for_again(kernelbench, tmp_path):
    cache = tmp_path / "cache"
    first = _judge(kernelbench, "relu_correct", cache, reference_cache_min_compute_s=3600.0)
    assert first.status == "pass" and first.reference["cache"]["stored"] is False
    assert "reference_cache_min_compute_s" in first.reference["cache"]["note"]
    again = _judge(kernelbench, "relu_correct", cache, reference_cache_min_compute_s=3600.0)
    assert again.reference["cache"]["hit"] is False  # nothing was stored to hit
    assert again.reference["cache"]["stored"] is True and "1 evaluation(s) computed them" in again.reference["cache"]["note"]
    third = _judge(kernelbench, "relu_correct", cache, reference_cache_min_compute_s=3600.0)
    assert third.reference["cache"]["hit"] is True and _trials(third) == _trials(first)
    assert not list((cache / "references").glob(refstore.MISSED + "*"))  # the count goes with the stored entry
