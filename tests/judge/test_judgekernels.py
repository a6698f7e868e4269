"""The shared folder of the judge's own compiled kernels (judge/judgekernels.py): a worker seeds its
own Triton cache from it, and the supervisor publishes only plain files from the worker's folders."""
from __future__ import annotations

import os

from kernelwright.judge import judgekernels


def entry(folder, name: str, files: dict[str, bytes]):
    (folder / name).mkdir(parents=True)
    for file, data in files.items():
        (folder / name / file).write_bytes(data)


def test_a_worker_is_seeded_with_the_entries_it_lacks(tmp_path):
    shared, own = tmp_path / "shared", tmp_path / "own"
    entry(shared, "AAA", {"k.cubin": b"1", "k.json": b"{}"})
    entry(own, "BBB", {"x.so": b"2"})
    assert judgekernels.seed(shared, own) == {"AAA", "BBB"}
    assert (own / "AAA" / "k.cubin").read_bytes() == b"1"
    assert judgekernels.seed(tmp_path / "missing", own) == {"AAA", "BBB"}  # no shared folder yet: nothing to copy


def test_the_supervisor_publishes_new_entries_of_the_workers_own_folder(tmp_path):
    cache, work = tmp_path / "cache", tmp_path / "work"
    own = work / ".cache" / "triton"
    entry(own, "NEW", {"k.cubin": b"cubin", "k.json": b"{}"})
    os.symlink("/etc/passwd", own / "NEW" / "link")
    (own / "NEW" / "sub").mkdir()
    reply = judgekernels.publish(cache, own, ["NEW", "../escape", ".tmp-x"], allowed=[work])
    assert reply == {"ok": True, "stored": ["NEW"]}
    stored = judgekernels.shared_folder(cache) / "NEW"
    assert sorted(p.name for p in stored.iterdir()) == ["k.cubin", "k.json"]  # no link, no sub-folder
    assert judgekernels.publish(cache, own, ["NEW"], allowed=[work]) == {"ok": True, "stored": []}


def test_entries_outside_the_workers_folders_are_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    entry(elsewhere, "NEW", {"k.cubin": b"x"})
    reply = judgekernels.publish(tmp_path / "cache", elsewhere, ["NEW"], allowed=[tmp_path / "work"])
    assert "not the evaluation's own cache folder" in reply["error"]
    assert not judgekernels.shared_folder(tmp_path / "cache").exists()


def test_an_offer_above_the_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(judgekernels, "MAX_BYTES", 10)
    own = tmp_path / "work" / "triton"
    entry(own, "BIG", {"k.cubin": b"x" * 11})
    assert "MiB of kernels offered" in judgekernels.publish(tmp_path / "cache", own, ["BIG"], [tmp_path / "work"])["error"]


def test_a_seeded_kernel_is_found_by_tritons_cache_though_its_compiler_folder_is_gone(tmp_path, monkeypatch):
    """Triton's group file names a kernel's files by absolute path in the folder that compiled it;
    after seeding, Triton's own cache lookup must find them in the worker's copy (a hit, not a
    compile)."""
    import json

    import pytest

    cache = pytest.importorskip("triton.runtime.cache")
    shared, own, gone = tmp_path / "shared", tmp_path / "own", tmp_path / "compiled-here"
    group = {"child_paths": {name: str(gone / "KEY" / name) for name in ("k.cubin", "k.json")}}
    entry(shared, "KEY", {"k.cubin": b"cubin", "k.json": b"{}", "__grp__k.json": json.dumps(group).encode()})
    judgekernels.seed(shared, own)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(own))
    found = cache.FileCacheManager("KEY").get_group("k.json")
    assert found == {"k.cubin": str(own / "KEY" / "k.cubin"), "k.json": str(own / "KEY" / "k.json")}
    assert json.loads((shared / "KEY" / "__grp__k.json").read_text()) == group  # the shared copy is untouched
