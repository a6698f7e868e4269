"""The launcher the supervisor starts profiled programs with (`judge/launch.py`): why it exists (a
process a confined process starts cannot write its own /proc entries, which CUDA's driver needs),
and that it confines itself before the program exists, keeps the pid, and gives the program its own
/proc entries and nothing more. Confinement cannot be undone, so every case runs in new processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.judge import launch
from kernelwright.judge.confine import landlock_abi

REPO = Path(__file__).resolve().parents[2]
needs_landlock = pytest.mark.skipif(landlock_abi()[0] < 1, reason=f"no Landlock here: {landlock_abi()[1]}")

# what the launched program (or a child of a confined process) may do; prints JSON
PROBE = r"""
import json, os, sys
from pathlib import Path
mine = Path(sys.argv[1])
seen = {"pid": os.getpid(), "env": {k: os.environ.get(k) for k in ("KW_SPEC_VAR", "KW_INJECTED", "KW_SUPERVISOR_ONLY")}}
def probe(name, action):
    try:
        action()
        seen[name] = "ok"
    except OSError as exc:
        seen[name] = f"refused: {type(exc).__name__}"
probe("write_own_proc", lambda: open("/proc/self/comm", "w").write("kw-probe"))
probe("write_own_thread_proc", lambda: open(f"/proc/self/task/{os.getpid()}/comm", "w").write("kw-probe"))
probe("write_parent_proc", lambda: open(f"/proc/{os.getppid()}/comm", "w").write("pwned"))
probe("write_work", lambda: (mine / "work" / "x").write_text("x"))
probe("write_outside", lambda: (mine.parent / "outside.txt").write_text("x"))
probe("read_other", lambda: (mine.parent / "kw-judge-other" / "secret").read_text())
probe("signal_parent", lambda: os.kill(os.getppid(), 0))
status = Path("/proc/self/status").read_text()
seen["no_new_privs"] = [l.split()[1] for l in status.splitlines() if l.startswith("NoNewPrivs")][0]
seen["cwd"] = os.getcwd()
print(json.dumps(seen), flush=True)
"""


def _scratch(root: Path) -> Path:
    mine = root / "kw-judge-mine"
    (mine / "work").mkdir(parents=True)
    (mine / "trusted").mkdir()
    (root / "kw-judge-other").mkdir()
    (root / "kw-judge-other" / "secret").write_text("s")
    return mine


def _spec(mine: Path, base_env: dict[str, str], argv: list[str] | None = None, env: dict | None = None) -> Path:
    spec = mine / "trusted" / "launch-1.json"
    spec.write_text(json.dumps({
        "argv": argv or [sys.executable, "-c", PROBE, str(mine)], "cwd": str(mine / "work"),
        "env": env or {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", ""), "KW_SPEC_VAR": "from the worker"},
        "base_env": launch.digests(base_env)}))
    return spec


def _launch(mine: Path, *flags: str, inject: bool = True) -> tuple[subprocess.CompletedProcess, int]:
    """Run the launcher as the supervisor would: its environment is the supervisor's (`base`), plus,
    when `inject`, a variable of the program that started it (as ncu adds its injection library's)."""
    base = {**os.environ, "PYTHONPATH": str(REPO), "KW_SUPERVISOR_ONLY": "trusted"}
    spec = _spec(mine, base)
    env = {**base, "KW_INJECTED": "by ncu"} if inject else base
    proc = subprocess.Popen([sys.executable, "-m", "kernelwright.judge.launch", "--scratch", str(mine),
                             "--writable", str(mine / "work"), *flags, str(spec)], cwd=mine / "trusted", env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


@needs_landlock
def test_a_child_of_a_confined_process_cannot_write_its_own_proc_entries(tmp_path):
    """The bug the launcher exists for: CUDA in the profile runner (started by the confined worker)
    found no driver, because the worker's rules name only the worker's own /proc folder."""
    mine = _scratch(tmp_path)
    script = (f"from kernelwright.judge.confine import confine\nimport subprocess, sys\n"
              f"confine({str(mine)!r}, [{str(mine / 'work')!r}])\n"
              f"sys.exit(subprocess.run([sys.executable, '-c', {PROBE!r}, {str(mine)!r}]).returncode)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["write_own_proc"].startswith("refused") and seen["write_own_thread_proc"].startswith("refused")
    assert seen["write_work"] == "ok" and seen["write_outside"].startswith("refused")


@needs_landlock
def test_the_launched_program_is_confined_keeps_the_pid_and_may_write_only_its_own_proc_entries(tmp_path):
    mine = _scratch(tmp_path)
    done, pid = _launch(mine, "--require")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["pid"] == pid  # execve: the confinement was made for this pid's /proc entries
    assert seen["write_own_proc"] == "ok" and seen["write_own_thread_proc"] == "ok"
    assert seen["write_parent_proc"].startswith("refused")
    assert seen["write_work"] == "ok" and seen["write_outside"].startswith("refused")
    assert seen["read_other"].startswith("refused") and seen["no_new_privs"] == "1"
    if landlock_abi()[0] >= 6:
        assert seen["signal_parent"].startswith("refused")
    assert seen["cwd"] == str(mine / "work")
    # the worker's variables and what the program's starter added; not the supervisor's own
    assert seen["env"] == {"KW_SPEC_VAR": "from the worker", "KW_INJECTED": "by ncu", "KW_SUPERVISOR_ONLY": None}
    assert not (tmp_path / "outside.txt").exists()
    report_line = next(line for line in done.stderr.splitlines() if line.startswith(launch.MARKER))
    report = json.loads(report_line[len(launch.MARKER):])
    assert report["active"] and "/proc/self" in report["devices"] and report["writable"] == [str(mine / "work")]


@needs_landlock
def test_run_by_candidate_code_the_launcher_escapes_nothing(tmp_path):
    """Started inside a confined process with the widest rules, the launcher adds a domain; the outer
    one stays: its own /proc entries stay unwritable and writes outside stay refused."""
    mine = _scratch(tmp_path)
    spec = _spec(mine, dict(os.environ))
    script = (f"from kernelwright.judge.confine import confine\nimport subprocess, sys\n"
              f"confine({str(mine)!r}, [{str(mine / 'work')!r}])\n"
              f"sys.exit(subprocess.run([sys.executable, '-m', 'kernelwright.judge.launch', '--scratch', '/', "
              f"'--writable', '/', {str(spec)!r}]).returncode)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["write_own_proc"].startswith("refused") and seen["write_outside"].startswith("refused")
    assert seen["read_other"].startswith("refused") and not (tmp_path / "outside.txt").exists()


def test_switched_off_the_program_runs_unconfined_but_marked(tmp_path):
    mine = _scratch(tmp_path)
    done, _ = _launch(mine, "--off", inject=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["write_outside"] == "ok" and seen["no_new_privs"] == "1"


def test_a_spec_that_cannot_be_run_is_an_exit_status_and_a_message(tmp_path):
    mine = _scratch(tmp_path)
    spec = _spec(mine, dict(os.environ), argv=[str(tmp_path / "no-such-program")])
    done = subprocess.run([sys.executable, "-m", "kernelwright.judge.launch", "--scratch", str(mine), "--off",
                           str(spec)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 127 and "cannot start the program" in done.stderr


CUDA_PROBE = r"""
import json, torch
try:
    torch.cuda.init()
    print(json.dumps({"devices": torch.cuda.device_count(), "sum": float(torch.ones(1024, device="cuda").sum())}))
except Exception as exc:  # what a process without its own /proc entries gets
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
"""


@pytest.mark.gpu
@needs_landlock
def test_on_the_gpu_cuda_works_in_a_launched_program_and_not_in_a_confined_processs_child(tmp_path):
    """The device-side proof of the fix: the same CUDA program, started by a confined process (fails:
    the bug seen on the H100) and by the launcher (works)."""
    mine = _scratch(tmp_path)
    argv = [sys.executable, "-c", CUDA_PROBE]
    work = str(mine / "work")
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": work, "TMPDIR": work, "CUDA_CACHE_PATH": work}
    spec = _spec(mine, env, argv=argv, env=env)
    launched = subprocess.run([sys.executable, "-m", "kernelwright.judge.launch", "--scratch", str(mine), "--writable",
                               str(mine / "work"), "--require", str(spec)], capture_output=True, text=True,
                              timeout=300, env=env)
    script = (f"from kernelwright.judge.confine import confine\nimport subprocess, sys\n"
              f"confine({str(mine)!r}, [{str(mine / 'work')!r}])\nsys.exit(subprocess.run({argv!r}).returncode)\n")
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    seen = {"launched": json.loads(launched.stdout or "{}"), "child_of_confined": json.loads(child.stdout or "{}")}
    if os.environ.get("OUT"):
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "launch_cuda.json").write_text(json.dumps(seen, indent=1))
    assert seen["launched"].get("devices", 0) >= 1 and seen["launched"]["sum"] == 1024.0, (seen, launched.stderr)
    # the cause (the H100's error 304 / "0 active drivers"): a child has no own /proc entries writable
    assert "error" in seen["child_of_confined"] or child.returncode != 0, (seen, child.stderr[-2000:])
