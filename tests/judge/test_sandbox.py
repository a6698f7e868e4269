"""The sandbox: time limits that kill the whole group, signals, bounded output, scratch dirs, network."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kernelwright.judge import sandbox


def run_python(tmp_path: Path, code: str, **kwargs) -> sandbox.ProcessInfo:
    spec = sandbox.SandboxSpec(argv=[sys.executable, "-c", code], workdir=tmp_path / "work",
                               timeout_s=kwargs.pop("timeout_s", 60), **kwargs)
    return sandbox.run(spec)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie is dead, only not yet reaped


def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = ("import subprocess, time\n"
            f"p = subprocess.Popen(['sleep', '300'])\nopen({str(pid_file)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(300)")
    start = time.monotonic()
    info = run_python(tmp_path, code, timeout_s=3)
    assert info.timed_out and info.signal == "SIGKILL"
    assert time.monotonic() - start < 30
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(grandchild)


def test_moving_deadline_is_honoured(tmp_path):
    info = run_python(tmp_path, "import time; time.sleep(60)", timeout_s=60, deadline=lambda start: start + 1)
    assert info.timed_out and info.wall_s < 20


def test_signal_death_is_named(tmp_path):
    info = run_python(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert info.signal == "SIGSEGV" and not info.timed_out and info.exit_code == -11


def test_output_is_bounded_to_its_tail(tmp_path):
    info = run_python(tmp_path, "import sys\nfor i in range(20000): print('x' * 99)\nprint('THE END')",
                      output_limit_bytes=4096)
    assert info.exit_code == 0
    assert info.stdout_tail.rstrip().endswith("THE END")
    assert "earlier bytes dropped" in info.stdout_tail
    assert len(info.stdout_tail) < 8192


def test_scratch_is_cwd_home_and_tmp_and_core_dumps_are_off(tmp_path):
    code = ("import os, resource, tempfile\n"
            "print(os.getcwd()); print(os.environ['HOME']); print(tempfile.gettempdir())\n"
            "print(resource.getrlimit(resource.RLIMIT_CORE)[0])")
    info = run_python(tmp_path, code)
    cwd, home, tmp, core = info.stdout_tail.split()
    work = str((tmp_path / "work").resolve())
    assert Path(cwd).resolve() == Path(work) and home == work and tmp.startswith(work)
    assert core == "0"


def test_network_isolation_is_enforced_or_reported(tmp_path):
    info = run_python(tmp_path, "import socket; print(sorted(n for _, n in socket.if_nameindex()))")
    prefix, note = sandbox.network_prefix()
    assert info.network_isolated == bool(prefix)
    assert info.isolation["network"] == note
    if prefix:
        assert info.stdout_tail.strip() == "['lo']"
    else:
        assert note.startswith("not enforced")


def test_network_isolation_can_be_switched_off(tmp_path):
    info = run_python(tmp_path, "print('ok')", no_network=False)
    assert not info.network_isolated and info.isolation["network"] == "not requested"


def test_environment_reaches_the_child(tmp_path):
    info = run_python(tmp_path, "import os; print(os.environ['KW_TEST_VALUE'])", env={"KW_TEST_VALUE": "42"})
    assert info.stdout_tail.strip() == "42"
    assert os.environ.get("KW_TEST_VALUE") is None


_ORPHAN = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "from kernelwright.judge.guards import die_with_parent; die_with_parent(); import time; time.sleep(60)"],
    env={**os.environ, "KW_PARENT_PID": str(os.getpid())})
print(child.pid, flush=True)
time.sleep(1.0)
os._exit(0)  # the judging process dies without cleaning up
"""


def test_a_worker_dies_with_the_process_that_started_it(tmp_path):
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _ORPHAN], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    child = int(done.stdout.split()[0])
    for _ in range(100):  # SIGKILL is asynchronous: give the kernel a moment
        if not _alive(child):
            return
        time.sleep(0.05)
    os.kill(child, 9)
    raise AssertionError("the worker outlived the process that started it")


def test_the_child_inherits_no_credentials_cache_paths_or_judge_internals(tmp_path, monkeypatch):
    for name, value in {"OPENAI_API_KEY": "sk-1", "KW_LLM_TOKEN": "t", "AWS_SECRET_ACCESS_KEY": "s",
                        "KW_CACHE_DIR": "/cache", "KW_PARENT_PID": "1", "HF_HOME": "/hf",
                        "CUDA_VISIBLE_DEVICES": "0", "TORCH_CUDA_ARCH_LIST": "9.0", "OMP_NUM_THREADS": "2"}.items():
        monkeypatch.setenv(name, value)
    info = run_python(tmp_path, "import os, json; print(json.dumps(sorted(os.environ)))")
    names = set(__import__("json").loads(info.stdout_tail))
    assert not names & {"OPENAI_API_KEY", "KW_LLM_TOKEN", "AWS_SECRET_ACCESS_KEY", "KW_CACHE_DIR", "KW_PARENT_PID",
                        "HF_HOME"}
    assert {"CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "OMP_NUM_THREADS", "PATH", "HOME", "TMPDIR"} <= names


_CLEANS_UP = """
import signal, sys, time
def stop(*_):
    open(sys.argv[1], "w").write("cleaned up")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
time.sleep(300)
"""


def test_at_a_time_limit_the_child_gets_sigterm_and_its_grace_before_sigkill(tmp_path):
    marker = tmp_path / "marker"
    spec = sandbox.SandboxSpec(argv=[sys.executable, "-c", _CLEANS_UP, str(marker)], workdir=tmp_path / "work",
                               timeout_s=2, stop_grace_s=10)
    info = sandbox.run(spec)
    assert info.timed_out and marker.read_text() == "cleaned up"
