"""The cross-process GPU admission ledger (judge/scheduling/ledger.py): real separate processes, each with its
own MemoryAdmission and a fake free-memory source, sharing one ledger folder; and the CLI's single
judge going through it (its worker run replaced by a recorder: no GPU here)."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling import pool as pool_module
from kernelwright.judge.scheduling.admission import GIB, OOM_RETRIED, PEAK_KEY, MemoryAdmission
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.ledger import GpuLedger, LedgerEntry, new_entry, process_alive
from kernelwright.judge.verdict import ERROR, PASS, Verdict

REPO = Path(__file__).resolve().parents[3]

# One judge process: admits one job of a problem measured at NEED GiB on GPU "0" of a GPU with FREE
# GiB free (a fake source that never changes), says "admitted", holds until a line on stdin.
CHILD = r"""
import sys
from kernelwright.judge.scheduling.admission import GIB, OOM_RETRIED, PEAK_KEY, MemoryAdmission
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.ledger import GpuLedger

folder, free, need, exclusive = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
admission = MemoryAdmission(free_bytes=lambda gpu: free * GIB, headroom_bytes=2 * GIB, margin=1.0,
                            ledgers=lambda gpu: GpuLedger(folder, "gpu-" + gpu), poll_s=0.05, recheck_s=0.2)
admission.record("k", need * GIB)
print("asking", flush=True)
with admission.admitted("0", "k", exclusive=exclusive, timeout_s=60):
    print("admitted", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


class Judge:
    """A judge process holding (or waiting for) one job on the shared ledger."""

    def __init__(self, folder: Path, free: int, need: int, exclusive: bool = False):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), str(free), str(need),
                                         "1" if exclusive else "0"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.said("asking", 30)

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.strip())

    def said(self, word: str, within: float) -> bool:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                if self.lines.get(timeout=max(0.01, deadline - time.monotonic())) == word:
                    return True
            except queue.Empty:
                return False
        return False

    def release(self) -> None:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self.said("released", 10)
        self.process.wait(10)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@pytest.fixture
def judges(tmp_path):
    started: list[Judge] = []

    def start(free: int, need: int, exclusive: bool = False) -> Judge:
        started.append(Judge(tmp_path / "ledger", free, need, exclusive))
        return started[-1]

    yield start
    for judge in started:
        judge.stop()


def _ledger(tmp_path) -> GpuLedger:
    return GpuLedger(tmp_path / "ledger", "gpu-0")


def test_a_second_judge_waits_while_the_first_holds_the_room_then_proceeds(judges, tmp_path):
    first = judges(free=30, need=20)
    assert first.said("admitted", 10)  # nothing else on the GPU
    second = judges(free=30, need=12)  # 12 + 2 > 30 - 20: its own free-memory reading alone would admit it
    assert not second.said("admitted", 1.5)
    [entry] = _ledger(tmp_path).entries()
    assert entry.pid == first.process.pid and entry.need == 20 * GIB and not entry.exclusive
    first.release()
    assert second.said("admitted", 10)
    second.release()
    assert _ledger(tmp_path).entries() == []


def test_jobs_that_fit_beside_each_other_run_together_across_processes(judges):
    first = judges(free=40, need=10)
    assert first.said("admitted", 10)
    second = judges(free=40, need=10)  # 10 + 2 <= 40 - 10
    assert second.said("admitted", 10)


def test_an_exclusive_job_waits_for_other_judges_and_keeps_new_jobs_out(judges, tmp_path):
    holder = judges(free=80, need=1)
    assert holder.said("admitted", 10)
    alone = judges(free=80, need=1, exclusive=True)
    assert not alone.said("admitted", 1.0)  # another process's job is on the GPU
    waiting = [e for e in _ledger(tmp_path).entries() if e.waiting]
    assert [(e.pid, e.exclusive) for e in waiting] == [(alone.process.pid, True)]
    late = judges(free=80, need=1)  # plenty of memory, but the exclusive job waits: no new jobs
    assert not late.said("admitted", 1.0)
    holder.release()
    assert alone.said("admitted", 10)
    assert not late.said("admitted", 0.5)  # nothing beside an exclusive job
    alone.release()
    assert late.said("admitted", 10)


def test_a_killed_judges_entry_is_pruned(judges, tmp_path):
    doomed = judges(free=30, need=25)
    assert doomed.said("admitted", 10)
    assert [e.pid for e in _ledger(tmp_path).entries()] == [doomed.process.pid]
    waiting = judges(free=30, need=10)
    assert not waiting.said("admitted", 1.0)
    doomed.kill()  # no release: its entry stays in the file until someone reads it
    assert waiting.said("admitted", 10)
    assert [e.pid for e in _ledger(tmp_path).entries()] == [waiting.process.pid]


def test_an_entry_of_a_reused_pid_is_pruned(tmp_path):
    ledger = _ledger(tmp_path)
    mine = new_entry("me", "t1", GIB, False)
    assert process_alive(mine.pid, mine.started)
    reused = LedgerEntry(**{**mine.__dict__, "token": "t2", "started": (mine.started or 0) + 1})
    ledger.put(mine)
    ledger.put(reused)
    assert [e.token for e in ledger.entries()] == ["t1"]


def test_a_corrupt_ledger_is_rebuilt_not_a_crash(tmp_path):
    ledger = _ledger(tmp_path)
    ledger.folder.mkdir(parents=True)
    admission = MemoryAdmission(free_bytes=lambda gpu: 80 * GIB, ledgers=lambda gpu: ledger, poll_s=0.05)
    for garbage in ("{not json", json.dumps({"entries": [{"bogus": 1}]}), json.dumps([1, 2]), "\xff\xfe"):
        ledger.path.write_text(garbage)
        with admission.admitted("0", "k"):
            [entry] = ledger.entries()
            assert entry.pid == os.getpid() and entry.owner == admission.owner
        assert json.loads(ledger.path.read_text()) == {"version": 1, "entries": []}


def test_two_admissions_in_one_process_see_each_other_through_the_ledger(tmp_path):
    """Two pools in one process (a search's pool and a tuner's) are two judges as well."""
    ledger = _ledger(tmp_path)
    make = lambda: MemoryAdmission(free_bytes=lambda gpu: 30 * GIB, margin=1.0, headroom_bytes=2 * GIB,  # noqa: E731
                                   ledgers=lambda gpu: ledger, poll_s=0.05, recheck_s=0.2)
    first, second = make(), make()
    first.record("k", 20 * GIB)
    second.record("k", 20 * GIB)
    admitted = threading.Event()

    def run_second():
        with second.admitted("0", "k"):
            admitted.set()

    with first.admitted("0", "k"):
        threading.Thread(target=run_second, daemon=True).start()
        assert not admitted.wait(1.0)
    assert admitted.wait(5)


def test_the_cli_single_judge_holds_a_ledger_entry_and_waits_for_other_judges(judges, tmp_path, monkeypatch):
    """`kernelwright judge PROBLEM CANDIDATE` on a GPU machine (faked: one GPU, the worker run
    replaced by a recorder) waits while another judge process runs an exclusive job, and its own
    job is listed on the GPU's ledger while it runs."""
    from kernelwright.cli.judge_cmd import register

    monkeypatch.setenv("KW_LOCK_DIR", str(tmp_path / "ledger"))
    monkeypatch.setattr(pool_module, "visible_gpus", lambda: (0,))
    monkeypatch.setattr(pool_module, "gpu_ledger_key", lambda gpu: f"gpu-{gpu}")
    seen = []

    def recorded_run(self, job, config, env, phase):
        seen.append((phase, env.get("CUDA_VISIBLE_DEVICES"), [e.pid for e in _ledger(tmp_path).entries()]))
        return Verdict(problem="p", candidate="c", status=PASS)

    monkeypatch.setattr(pool_module.JudgePool, "_run", recorded_run)
    other = judges(free=80, need=1, exclusive=True)
    assert other.said("admitted", 10)
    app = typer.Typer()
    register(app)
    result: dict = {}
    cli = threading.Thread(target=lambda: result.update(run=CliRunner().invoke(app, [
        "judge", str(REPO / "examples/problems/row_softmax.py"), str(REPO / "examples/candidates/row_softmax.py"),
        "--json", "--device", "cuda"])), daemon=True)
    cli.start()
    time.sleep(1.0)
    assert not seen  # another judge has the GPU to itself
    other.release()
    cli.join(20)
    assert result["run"].exit_code == 0, result["run"].output
    assert seen == [("evaluate", "0", [os.getpid()])]
    assert json.loads(result["run"].stdout)["stage_seconds"]["admission_wait"] >= 0.5
    assert _ledger(tmp_path).entries() == []


def test_an_oom_beside_another_judges_job_is_retried_once_that_judge_is_gone(judges, tmp_path, monkeypatch):
    """A pool's evaluation runs out of memory while another judge process holds a job on the GPU
    (nvidia-smi says nothing here): the OOM is the co-scheduling's, and the retry waits until no
    other judge has an entry on the GPU."""
    monkeypatch.setenv("KW_LOCK_DIR", str(tmp_path / "ledger"))
    monkeypatch.setattr(pool_module, "gpu_ledger_key", lambda gpu: f"gpu-{gpu}")
    other = judges(free=80, need=1)
    assert other.said("admitted", 10)
    runs = []

    def run(self, job, config, env, phase):
        others = [e.pid for e in _ledger(tmp_path).entries() if e.pid != os.getpid()]
        runs.append(others)
        verdict = Verdict(problem="p", candidate="c", status=PASS, environment={PEAK_KEY: GIB})
        if len(runs) == 1:
            verdict.status, verdict.error = ERROR, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"
            threading.Timer(1.0, other.release).start()  # the other judge finishes a second later
        return verdict

    monkeypatch.setattr(pool_module.JudgePool, "_run", run)
    with pool_module.JudgePool(JudgeConfig(device="cuda"), gpus=[0], per_gpu=1, warm=False, precompile=False,
                               free_bytes=lambda gpu: 80 * GIB, gpu_processes=lambda gpu: 0) as pool:
        verdict = pool.judge_many([(SourceText("class Model: pass", "p"), SourceText("x", "c"))])[0]
    assert runs == [[other.process.pid], []]  # first beside the other judge, then alone
    assert verdict.status == PASS
    [flag] = [f for f in verdict.flags if f.code == OOM_RETRIED]
    assert "1 evaluation(s) of other judge processes" in flag.message and "of any judge process" in flag.message
    assert verdict.stage_seconds["admission_wait"] >= 0.5


def test_a_ledger_that_cannot_be_written_costs_only_the_other_processes_view(tmp_path):
    """A lock folder that cannot be made (a file is in its way): admission goes on with this
    process's jobs only, no error reaches the evaluation."""
    (tmp_path / "blocked").write_text("a file, not a folder")
    ledger = GpuLedger(tmp_path / "blocked" / "ledger", "gpu-0")
    admission = MemoryAdmission(free_bytes=lambda gpu: 80 * GIB, ledgers=lambda gpu: ledger, poll_s=0.05)
    with admission.admitted("0", "k"):
        assert ledger.entries() == []
    with admission.admitted("0", "k", exclusive=True):
        pass
