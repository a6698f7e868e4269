"""confine(): what a confined process may still do, and what it may not. Confinement cannot be undone,
so each case runs in its own Python process and prints what it saw as JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.judge.confine import SCRATCH_PREFIX, ConfinementReport, landlock_abi, readable_paths

REPO = Path(__file__).resolve().parents[2]
needs_landlock = pytest.mark.skipif(landlock_abi()[0] < 1, reason=f"no Landlock here: {landlock_abi()[1]}")

_PROBE = r"""
import json, os, signal, sys
from pathlib import Path
from kernelwright.judge.confine import confine

root = Path(sys.argv[1])
mine = root / "kw-judge-mine"
report = confine(mine, [mine / "work"])
print("confined", flush=True)
sys.stdin.readline()  # the test makes kw-judge-later now: a scratch folder created after confinement
seen = {"report": report.to_dict()}

def probe(name, action):
    try:
        seen[name] = "ok: " + str(action())
    except OSError as exc:
        seen[name] = f"refused: {type(exc).__name__}"

probe("write_work", lambda: (mine / "work" / "x").write_text("x"))
probe("write_scratch_root", lambda: (mine / "record.json").write_text("x"))
probe("write_outside", lambda: (root / "outside.txt").write_text("x"))
probe("read_request", lambda: (mine / "request.json").read_text())
probe("read_other", lambda: (root / "kw-judge-other" / "secret").read_text())
probe("list_other", lambda: os.listdir(root / "kw-judge-other"))
probe("read_later", lambda: os.listdir(root / "kw-judge-later"))
probe("read_shared", lambda: (root / "shared.txt").read_text())
probe("read_system", lambda: len(Path("/etc/hostname").read_text()) >= 0)
probe("dev_null", lambda: open("/dev/null", "w").write("x"))
probe("rename_in_work", lambda: os.replace(mine / "work" / "x", mine / "work" / "y"))
probe("signal_parent", lambda: os.kill(os.getppid(), 0))
probe("write_own_proc", lambda: open("/proc/self/comm", "w").write("kw-probe"))
probe("write_parent_proc", lambda: open(f"/proc/{os.getppid()}/comm", "w").write("pwned"))
probe("signal_self_child", lambda: __import__("subprocess").run(["true"]).returncode)
status = Path("/proc/self/status").read_text()
seen["cap_eff"] = [l.split()[1] for l in status.splitlines() if l.startswith("CapEff")][0]
seen["no_new_privs"] = [l.split()[1] for l in status.splitlines() if l.startswith("NoNewPrivs")][0]
print(json.dumps(seen))
"""


def _run_probe(root: Path) -> dict:
    mine = root / "kw-judge-mine"
    (mine / "work").mkdir(parents=True)
    (mine / "request.json").write_text("{}")
    (root / "kw-judge-other").mkdir()
    (root / "kw-judge-other" / "secret").write_text("s")
    (root / "shared.txt").write_text("shared")
    proc = subprocess.Popen([sys.executable, "-c", _PROBE, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout.readline().strip() == "confined", proc.stderr.read()
    (root / "kw-judge-later").mkdir()
    out, err = proc.communicate("go\n", timeout=120)
    assert proc.returncode == 0, err
    return json.loads(out)


@needs_landlock
def test_a_confined_process_writes_only_its_folders_and_reads_no_other_scratch(tmp_path):
    seen = _run_probe(tmp_path)
    report = ConfinementReport(**seen["report"])
    assert report.active and report.mechanism.startswith("landlock") and report.threads == 1
    assert report.hidden == 1 and report.no_new_privs and "/dev/null" in report.devices
    assert "/proc/self" in report.devices  # its own /proc entries: CUDA's driver writes them
    for allowed in ("write_work", "read_request", "read_shared", "read_system", "dev_null", "rename_in_work",
                    "signal_self_child", "write_own_proc"):
        assert seen[allowed].startswith("ok"), (allowed, seen[allowed])
    for refused in ("write_scratch_root", "write_outside", "read_other", "list_other", "read_later",
                    "signal_parent", "write_parent_proc"):
        assert seen[refused].startswith("refused"), (refused, seen[refused])
    assert not (tmp_path / "outside.txt").exists()


@needs_landlock
def test_capabilities_are_dropped_when_root(tmp_path):
    seen = _run_probe(tmp_path)
    assert seen["no_new_privs"] == "1"
    if os.geteuid() == 0:
        assert int(seen["cap_eff"], 16) == 0
        assert seen["report"]["capabilities"] == "dropped all"


def test_readable_paths_hide_only_scratch_folders_and_links_into_them(tmp_path):
    root = tmp_path / "scratch"
    (root / f"{SCRATCH_PREFIX}a").mkdir(parents=True)
    (root / f"{SCRATCH_PREFIX}b").mkdir()
    (root / "locks").mkdir()
    (tmp_path / "link_to_scratch").symlink_to(root / f"{SCRATCH_PREFIX}b")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link_elsewhere").symlink_to(tmp_path / "elsewhere")
    grants, hidden = readable_paths(root, {root / f"{SCRATCH_PREFIX}a"})
    assert hidden == 1
    assert root / "locks" in grants and tmp_path / "elsewhere" in grants
    hidden_folder = root / f"{SCRATCH_PREFIX}b"
    assert not [g for g in grants if g == hidden_folder or hidden_folder in g.parents or g in (root, tmp_path)]
    assert Path("/usr") in grants or not Path("/usr").exists()


def test_without_landlock_the_report_says_why(monkeypatch):
    from kernelwright.judge import confine as module

    monkeypatch.setattr(module, "landlock_abi", lambda: (0, "Landlock unavailable (test)"))
    monkeypatch.setattr(module, "drop_capabilities", lambda keep=(): "unchanged (test)")
    report = module.confine(Path("/tmp"), [Path("/tmp")])
    assert not report.active and report.reason == "Landlock unavailable (test)"
    assert report.summary().startswith("not enforced: Landlock unavailable")


_HIDDEN_PROBE = r"""
import json, sys
from pathlib import Path
from kernelwright.judge.confine import confine

root = Path(sys.argv[1])
scratch = root / "kw-judge-mine"
report = confine(scratch, [scratch / "runner"], hidden=[scratch / "work", scratch / "request.json", root / "cache" / "references"])
seen = {"report": report.to_dict()}

def probe(name, action):
    try:
        seen[name] = "ok: " + str(action())
    except OSError as exc:
        seen[name] = f"refused: {type(exc).__name__}"

probe("read_own", lambda: (scratch / "runner" / "candidate.py").read_text())
probe("read_request", lambda: (scratch / "request.json").read_text())
probe("read_checker", lambda: (scratch / "work" / "cases.pt").read_text())
probe("list_checker", lambda: len(list((scratch / "work").iterdir())))
probe("read_store", lambda: (root / "cache" / "references" / "k" / "cases.pt").read_text())
probe("read_cache_sibling", lambda: (root / "cache" / "torch_extensions" / "lib.so").read_text())
probe("read_outside", lambda: (root / "shared.txt").read_text())
print(json.dumps(seen))
"""


@needs_landlock
def test_hidden_paths_are_unreadable_and_their_siblings_are_not(tmp_path):
    """The runner's confinement: its own folder, the problem, the caches it loads builds from stay
    readable; the checker's folder, the request and the reference store do not."""
    scratch = tmp_path / "kw-judge-mine"
    for path, text in ((scratch / "runner" / "candidate.py", "c"), (scratch / "request.json", "{}"),
                       (scratch / "work" / "cases.pt", "refs"), (tmp_path / "cache" / "references" / "k" / "cases.pt", "refs"),
                       (tmp_path / "cache" / "torch_extensions" / "lib.so", "so"), (tmp_path / "shared.txt", "s")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    done = subprocess.run([sys.executable, "-c", _HIDDEN_PROBE, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["report"]["active"], seen["report"]
    assert seen["read_own"] == "ok: c" and seen["read_cache_sibling"] == "ok: so" and seen["read_outside"] == "ok: s"
    for name in ("read_request", "read_checker", "list_checker", "read_store"):
        assert seen[name] == "refused: PermissionError", (name, seen[name])
    assert len(seen["report"]["unreadable"]) == 3


def test_readable_paths_expands_the_way_to_each_hidden_path(tmp_path):
    (tmp_path / "a" / "hide").mkdir(parents=True)
    (tmp_path / "a" / "keep").mkdir()
    (tmp_path / "b").mkdir()
    grants, _ = readable_paths(tmp_path / "b", set(), [tmp_path / "a" / "hide"])
    assert tmp_path / "a" / "keep" in grants and tmp_path / "a" / "hide" not in grants
    assert tmp_path / "a" not in grants  # expanded, not granted whole
