"""Several GPUs in one pool (judge/scheduling/gpu_health.py) with fake GPUs: jobs spread over every
GPU, each verdict names its GPU, a GPU that fails costs only its in-flight evaluations (judged again
on another GPU, flagged) and leaves the rotation, and every GPU process gets NVLink multicast off.
Worker runs are replaced by fakes; the GPUs are indices with a fake probe and fake names."""
from __future__ import annotations

import threading

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.outcome import NOT_JUDGED, outcome
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling import gpu_health
from kernelwright.judge.scheduling.admission import GIB
from kernelwright.judge.scheduling.baseline_lane import LaneTask, child_env
from kernelwright.judge.scheduling.gpu_health import GPU_FAILED, MULTICAST_OFF, multicast_off, suspect
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
from kernelwright.judge.verdict import ERROR, FAIL, INFO, PASS, ProcessInfo, TrialResult, Verdict

LOST = "RuntimeError: CUDA error: GPU is lost (Xid 79)"


@pytest.fixture(autouse=True)
def _fake_gpus(tmp_path, monkeypatch):
    """Admission ledgers in this test's folder; GPU names as nvidia-smi would give them."""
    monkeypatch.setenv("KW_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(gpu_health, "gpu_identity", lambda index: (("index", int(index)), ("name", "NVIDIA H200"),
                                                                   ("uuid", f"GPU-fake-{index}")))


class FakeGpuPool(JudgePool):
    """Records (candidate, GPU) per evaluation; `broken` GPUs answer with `broken_text` (a device
    lost), `barrier` makes the first evaluations wait for each other (so they run at once)."""

    def __init__(self, *args, broken=(), broken_text=LOST, barrier=None, **kwargs):
        kwargs.setdefault("free_bytes", lambda gpu: 80 * GIB)
        kwargs.setdefault("gpu_processes", lambda gpu: 0)
        super().__init__(*args, **kwargs)
        self.broken, self.broken_text, self.barrier = set(broken), broken_text, barrier
        self.calls, self.lock = [], threading.Lock()

    def _run(self, job, config, env, phase):
        gpu = env.get("CUDA_VISIBLE_DEVICES", "")
        with self.lock:
            self.calls.append((job.candidate.name, gpu, dict(env)))
        if self.barrier is not None:
            try:
                self.barrier.wait(5)
            except threading.BrokenBarrierError:
                pass
        if gpu in self.broken:
            return Verdict(problem="p", candidate=job.candidate.name, status=FAIL, stage="check", error=self.broken_text)
        return Verdict(problem="p", candidate=job.candidate.name, status=PASS, stage="done")


def _jobs(count: int, prefix: str = "c") -> list[JudgeJob]:
    """Jobs of different problems (each problem's first job measures it alone: see admission.py)."""
    return [JudgeJob(SourceText(f"class Model: pass  # {prefix}{i}", f"p{i}"), SourceText("x", f"{prefix}{i}"))
            for i in range(count)]


def test_jobs_spread_over_every_gpu_and_each_verdict_names_its_gpu():
    pool = FakeGpuPool(JudgeConfig(), gpus=[0, 1], per_gpu=2, barrier=threading.Barrier(4))
    verdicts = pool.judge_many(_jobs(4))
    on = sorted(gpu for _, gpu, _ in pool.calls)
    assert on == ["0", "0", "1", "1"]  # four at once: two lanes on each GPU
    by_candidate = {name: gpu for name, gpu, _ in pool.calls}
    for verdict in verdicts:
        assert verdict.gpu == {"index": int(by_candidate[verdict.candidate]), "name": "NVIDIA H200",
                               "uuid": f"GPU-fake-{by_candidate[verdict.candidate]}"}
    assert pool.failed_gpus == {}


def test_a_gpu_that_fails_costs_only_its_in_flight_job_judged_again_elsewhere_and_leaves_the_rotation():
    lines, probed = [], []

    def probe(gpu):
        probed.append(gpu)
        return "nvidia-smi cannot read it: GPU is lost" if gpu == "1" else ""

    pool = FakeGpuPool(JudgeConfig(), gpus=[0, 1], per_gpu=1, broken={"1"}, gpu_probe=probe, log=lines.append,
                       barrier=threading.Barrier(2))
    first = pool.judge_many(_jobs(2, "a"))
    assert [v.status for v in first] == [PASS, PASS]  # nobody is blamed for GPU 1
    moved = next(v for v in first if any(f.code == GPU_FAILED for f in v.flags))
    flag = next(f for f in moved.flags if f.code == GPU_FAILED)
    assert flag.severity == INFO and "GPU 1 (NVIDIA H200) failed" in flag.message and "GPU is lost" in flag.message
    assert "judged again on GPU 0 (NVIDIA H200)" in flag.message and moved.gpu["index"] == 0
    ran = [(name, gpu) for name, gpu, _ in pool.calls]
    assert (moved.candidate, "1") in ran and (moved.candidate, "0") in ran  # the job that was on GPU 1, again on 0
    other = next(v for v in first if v is not moved)
    assert [gpu for name, gpu in ran if name == other.candidate] == ["0"]  # GPU 0's job ran once
    assert probed == ["1"] and set(pool.failed_gpus) == {"1"}
    assert len(lines) == 1 and "GPU 1 (NVIDIA H200) taken out of rotation" in lines[0] and "1 GPU(s) left (0)" in lines[0]

    pool.barrier = None
    calls_before = len(pool.calls)
    later = pool.judge_many(_jobs(4, "b"))
    assert [v.status for v in later] == [PASS] * 4
    assert {gpu for _, gpu, _ in pool.calls[calls_before:]} == {"0"}  # GPU 1 gets no further jobs
    assert not any(f.code == GPU_FAILED for v in later for f in v.flags)


def test_a_candidate_that_prints_a_device_lost_message_on_a_healthy_gpu_keeps_its_verdict():
    lines = []
    pool = FakeGpuPool(JudgeConfig(), gpus=[0, 1], per_gpu=1, broken={"0", "1"}, gpu_probe=lambda gpu: "",
                       log=lines.append)
    verdict = pool.judge_many(_jobs(1))[0]
    assert verdict.status == FAIL and verdict.error == LOST  # the probe found the GPU working: the candidate's own
    assert len(pool.calls) == 1 and pool.failed_gpus == {} and lines == []


def test_when_every_gpu_fails_the_job_is_not_judged_never_failed():
    pool = FakeGpuPool(JudgeConfig(), gpus=[0, 1], per_gpu=1, broken={"0", "1"},
                       gpu_probe=lambda gpu: "a CUDA context on it failed: CUDA_ERROR_NO_DEVICE", log=lambda line: None)
    verdict = pool.judge_many(_jobs(1))[0]
    assert verdict.status == ERROR and gpu_health.no_gpu_left(verdict)
    assert outcome(verdict).kind == NOT_JUDGED
    assert sorted(pool.failed_gpus) == ["0", "1"] and len(pool.calls) == 2
    assert [f.code for f in verdict.flags] == [GPU_FAILED, GPU_FAILED]
    again = pool.judge_many(_jobs(1, "late"))[0]  # nothing left to run on: not judged, nothing started
    assert gpu_health.no_gpu_left(again) and len(pool.calls) == 2


def test_a_worker_killed_from_outside_is_suspect_and_a_wrong_result_is_not():
    killed = Verdict(problem="p", candidate="c", status=FAIL, stage="check",
                     error="the judge process was killed by SIGKILL", process=ProcessInfo(exit_code=-9, signal="SIGKILL"))
    assert "SIGKILL" in suspect(killed)
    hung = Verdict(problem="p", candidate="c", status=FAIL, process=ProcessInfo(signal="SIGKILL", timed_out=True))
    assert suspect(hung) == ""  # the judge's own time limit killed it: the candidate hangs
    wrong = Verdict(problem="p", candidate="c", status=FAIL, trials=[TrialResult(0, 0, "given", False, message="mismatch")])
    assert suspect(wrong) == ""
    init = Verdict(problem="p", candidate="c", status=ERROR, stage="load",
                   error="RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.")
    assert "initialization failed" in suspect(init)
    assert suspect(Verdict(problem="p", candidate="c", status=PASS, error=LOST)) == ""


def test_every_gpu_process_gets_nvlink_multicast_off_unless_already_set(monkeypatch, tmp_path):
    for name in MULTICAST_OFF:
        monkeypatch.delenv(name, raising=False)
    envs = JudgePool(JudgeConfig(), gpus=[0, 1], per_gpu=2)._lane_envs()
    assert all({k: e[k] for k in MULTICAST_OFF} == MULTICAST_OFF for e in envs)
    assert MULTICAST_OFF == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    # the baseline lane's child (the same envs) keeps them past the sandbox's scrubbing
    task = LaneTask(name="p", problem=tmp_path / "p.py", overrides={}, config=JudgeConfig(), device="cuda")
    assert {k: child_env(task, envs[0], tmp_path)[k] for k in MULTICAST_OFF} == MULTICAST_OFF
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the user's choice stands, and travels explicitly
    assert multicast_off({"CUDA_VISIBLE_DEVICES": "1"})["NCCL_NVLS_ENABLE"] == "1"
    assert JudgePool(JudgeConfig(), gpus=[0])._lane_envs()[0]["NCCL_NVLS_ENABLE"] == "1"
    assert "NCCL_NVLS_ENABLE" not in JudgePool(JudgeConfig(), gpus=[])._lane_envs()[0]  # CPU lanes: no GPU


def test_the_probe_reports_a_gpu_nvidia_smi_cannot_read(monkeypatch):
    monkeypatch.setattr(gpu_health, "_nvidia_smi", lambda *args: (15, "Unable to determine the device handle for GPU1: GPU is lost"))
    assert "GPU is lost" in gpu_health.probe_gpu("1")


class SlowBrokenPool(FakeGpuPool):
    """A broken GPU answers only after a while, so every job is given a GPU before it fails."""

    def _run(self, job, config, env, phase):
        if env.get("CUDA_VISIBLE_DEVICES") in self.broken:
            threading.Event().wait(0.5)
        return super()._run(job, config, env, phase)


def test_jobs_waiting_for_a_gpu_that_fails_move_unflagged_and_only_the_one_it_ran_is_judged_again():
    pool = SlowBrokenPool(JudgeConfig(), gpus=[0, 1], per_gpu=1, broken={"1"}, log=lambda line: None,
                          gpu_probe=lambda gpu: "GPU is lost" if gpu == "1" else "")
    verdicts = pool.judge_many(_jobs(4))
    assert [v.status for v in verdicts] == [PASS] * 4 and {v.gpu["index"] for v in verdicts} == {0}
    on_one = [name for name, gpu, _ in pool.calls if gpu == "1"]
    assert len(on_one) == 1  # the GPU was decided while its lane was held: no second job started there
    flagged = [v.candidate for v in verdicts if any(f.code == GPU_FAILED for f in v.flags)]
    assert flagged == on_one  # the job that waited for GPU 1 moved to GPU 0 with nothing to flag
    assert pool._assigned == {"0": 0, "1": 0}  # every assignment given back
