"""The judge's trusted files: what counts as a change, what is invalidated, which package is watched."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from kernelwright.judge import trusted


@pytest.fixture
def files(tmp_path) -> trusted.TrustedFiles:
    package = tmp_path / "pkg" / "kernelwright"
    (package / "judge" / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "judge" / "check.py").write_text("CHECK = 1\n")
    (package / "judge" / "__pycache__" / "check.cpython-311.pyc").write_bytes(b"pyc")
    cache = tmp_path / "cache"
    (cache / "baselines").mkdir(parents=True)
    (cache / "baselines" / "p__eager__1.json").write_text(json.dumps({"timing": 1}))
    build = cache / "torch_extensions" / "ext_0123456789abcdef"
    build.mkdir(parents=True)
    (build / "kw_build.json").write_text("{}")
    (build / "ext_0123456789abcdef.so").write_bytes(b"elf")
    return trusted.TrustedFiles(package, cache)


def test_a_rewrite_that_restores_the_modification_time_is_still_a_change(files):
    before = files.snapshot()
    check = files.package / "judge" / "check.py"
    stat = check.stat()
    time.sleep(0.01)
    check.write_text("CHECK = 2\n")  # same size
    os.utime(check, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changes = files.changes(before, files.snapshot())
    assert changes.package == [str(check)] and not changes.caches


def test_new_package_files_count_except_other_interpreters_bytecode(files):
    before = files.snapshot()
    (files.package / "judge" / "planted.py").write_text("")
    (files.package / "judge" / "__pycache__" / "check.cpython-312.pyc").write_bytes(b"other")
    changes = files.changes(before, files.snapshot())
    assert changes.package == [str(files.package / "judge" / "planted.py")]


def test_changed_bytecode_is_a_change(files):
    before = files.snapshot()
    (files.package / "judge" / "__pycache__" / "check.cpython-311.pyc").write_bytes(b"evil")
    assert files.changes(before, files.snapshot()).package


def test_new_cache_records_are_not_changes_but_rewritten_or_removed_ones_are(files):
    before = files.snapshot()
    (files.cache / "baselines" / "q__eager__2.json").write_text("{}")
    new_build = files.cache / "torch_extensions" / "new_fedcba9876543210"
    new_build.mkdir()
    (new_build / "kw_build.json").write_text("{}")
    assert not files.changes(before, files.snapshot())
    with open(files.cache / "baselines" / "p__eager__1.json", "a") as handle:
        handle.write(" ")
    (files.cache / "torch_extensions" / "ext_0123456789abcdef" / "ext_0123456789abcdef.so").unlink()
    changes = files.changes(before, files.snapshot())
    assert len(changes.caches) == 2 and not changes.package
    removed = trusted.invalidate(changes.caches, files.cache)
    assert not (files.cache / "baselines" / "p__eager__1.json").exists()
    assert not (files.cache / "torch_extensions" / "ext_0123456789abcdef").exists()  # the whole build
    assert len(removed) == 2


def test_a_rewrite_reported_by_a_trusted_process_is_not_a_change(files, monkeypatch):
    monkeypatch.setattr(trusted, "_TRUSTED_WRITES", {})
    before = files.snapshot()
    record = files.cache / "baselines" / "p__eager__1.json"
    record.write_text(json.dumps({"timing": 2}))
    after = files.snapshot()
    trusted.note_trusted({str(record): list(after[str(record)])})
    assert not files.changes(before, after)


def test_the_watched_package_is_the_one_the_worker_imports(tmp_path):
    copy = tmp_path / "copy"
    (copy / "kernelwright").mkdir(parents=True)
    (copy / "kernelwright" / "__init__.py").write_text("")
    default = Path(trusted.__file__).resolve().parents[1]
    assert trusted.package_of(f"/nonexistent{os.pathsep}{copy}", default) == (copy / "kernelwright").resolve()
    assert trusted.package_of(None, default) == default


def test_compromise_is_remembered_by_the_process(monkeypatch):
    monkeypatch.setattr(trusted, "_COMPROMISED", [])
    assert trusted.compromised() == ""
    trusted.compromise("the package changed")
    trusted.compromise("the package changed")
    assert trusted.compromised() == "the package changed"
