"""GPU memory admission (judge/scheduling/admission.py) with a fake free-memory source, and the pool's retry
of an out-of-memory error that sharing the GPU caused (worker runs replaced by a fake that runs out
of memory only while another evaluation shares its GPU)."""
from __future__ import annotations

import threading
import time

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling.admission import GIB, OOM_ALONE, OOM_REFERENCE_ON_HOST, OOM_RETRIED, PEAK_KEY, MemoryAdmission, is_oom, memory_key
from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
from kernelwright.judge.verdict import ERROR, FAIL, PASS, REJECT, Flag, Verdict


@pytest.fixture(autouse=True)
def _own_ledgers(tmp_path, monkeypatch):
    """The pools' GPU admission ledgers (judge/scheduling/ledger.py) in this test's own folder, not the
    machine's: other test runs on this machine must not count as judges sharing the fake GPU."""
    monkeypatch.setenv("KW_LOCK_DIR", str(tmp_path / "locks"))


PROBLEM = SourceText("class Model: pass", "p")


def test_a_problem_not_measured_yet_has_no_estimate_then_its_peak_with_margin():
    admission = MemoryAdmission(free_bytes=lambda gpu: 80 * GIB, margin=1.25)
    assert admission.estimate("k") is None
    admission.record("k", 8 * GIB)
    admission.record("k", 4 * GIB)  # the largest peak seen counts
    admission.record("k", None)
    assert admission.estimate("k") == 10 * GIB


def _hold(admission, gpu, key, started, release, exclusive=False):
    with admission.admitted(gpu, key, exclusive=exclusive):
        started.set()
        release.wait(10)


def test_jobs_start_together_only_while_they_fit_in_free_memory_with_headroom():
    free = {"0": 30 * GIB}
    admission = MemoryAdmission(free_bytes=lambda gpu: free[gpu], headroom_bytes=2 * GIB, margin=1.0)
    admission.record("k", 12 * GIB)
    first, second, release = threading.Event(), threading.Event(), threading.Event()
    threading.Thread(target=_hold, args=(admission, "0", "k", first, release), daemon=True).start()
    assert first.wait(5)
    free["0"] = 25 * GIB  # 12 + 2 > 25 - 12: the second waits
    threading.Thread(target=_hold, args=(admission, "0", "k", second, release), daemon=True).start()
    assert not second.wait(0.5)
    with admission._cond:
        free["0"] = 40 * GIB  # now 12 + 2 <= 40 - 12
        admission._cond.notify_all()
    assert second.wait(5)
    release.set()


def test_an_unmeasured_problem_reserves_a_share_of_free_memory_beside_other_problems():
    """The first jobs of different problems share the GPU while their reservations fit (a suite of
    many problems is not judged one problem at a time); an exclusive job still has it alone."""
    admission = MemoryAdmission(free_bytes=lambda gpu: 80 * GIB, unknown_share=0.3, headroom_bytes=2 * GIB)
    events = [threading.Event() for _ in range(4)]
    release = threading.Event()
    for event, key in zip(events, ("a", "b", "c", "d"), strict=True):
        threading.Thread(target=_hold, args=(admission, "0", key, event, release), daemon=True).start()
        time.sleep(0.05)
    assert all(event.wait(5) for event in events[:3])  # 24 GiB each: 3 x (24 + 2) fit in 80
    assert not events[3].wait(0.3)  # a fourth does not: 24 + 2 > 80 - 72
    with admission._cond:
        assert sorted(r.need for r in admission._running["0"]) == [int(0.3 * 80 * GIB)] * 3
    release.set()
    assert events[3].wait(5)
    alone, release_alone, other = threading.Event(), threading.Event(), threading.Event()
    threading.Thread(target=_hold, args=(admission, "0", "a", alone, release_alone, True), daemon=True).start()
    assert alone.wait(5)
    threading.Thread(target=_hold, args=(admission, "0", "b", other, release_alone), daemon=True).start()
    assert not other.wait(0.3)  # nothing beside an exclusive job
    release_alone.set()
    assert other.wait(5)


def test_the_memory_key_names_source_overrides_and_device_not_the_rules():
    base = memory_key("src", {"n": 1}, "cuda")
    assert base == memory_key("src", {"n": 1}, "cuda")
    assert len({base, memory_key("src2", {"n": 1}, "cuda"), memory_key("src", {"n": 2}, "cuda"),
                memory_key("src", {"n": 1}, "cpu")}) == 4


def test_jobs_of_a_problem_wait_for_its_first_measurement_then_share_the_gpu():
    """Several jobs of a new problem submitted at once: one runs and is measured, the others wait
    for that measurement (not each reserving a share blindly), then run together."""
    admission = MemoryAdmission(free_bytes=lambda gpu: 80 * GIB, margin=1.0)
    first, release_first = threading.Event(), threading.Event()
    threading.Thread(target=_hold, args=(admission, "0", "new", first, release_first), daemon=True).start()
    assert first.wait(5)
    started = [threading.Event() for _ in range(3)]
    release = threading.Event()
    for event in started:
        threading.Thread(target=_hold, args=(admission, "0", "new", event, release), daemon=True).start()
    assert not any(event.wait(0.3) for event in started)  # the first has not been measured yet
    admission.record("new", 4 * GIB)
    assert all(event.wait(5) for event in started)  # measured: all three fit beside the first
    with admission._cond:
        needs = sorted(r.need for r in admission._running["0"])
    assert needs[:3] == [4 * GIB] * 3 and not admission._exclusive_waiting.get("0")
    release_first.set()
    release.set()


class SharingPool(JudgePool):
    """Evaluations replaced by a fake that measures a peak of 1 GiB and runs out of memory while
    another evaluation runs on the GPU at the same time (or always, for candidates named "hog").
    Like the worker, it keeps reference outputs on the GPU (`kept` bytes) only while the config's
    reference_device_share is above 0; "tight" runs out of memory only beside them, and "early"
    runs out before it records what it kept (while computing the references, say)."""

    def __init__(self, *args, kept: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock, self.running, self.calls, self.shares, self.kept = threading.Lock(), 0, [], [], kept

    def _run(self, job, config, env, phase):
        name = job.candidate.name
        with self.lock:
            self.running += 1
            self.calls.append(name)
            self.shares.append(config.reference_device_share)
        time.sleep(0.3)
        with self.lock:
            crowded = self.running > 1
            self.running -= 1
        kept = self.kept if config.reference_device_share > 0 else 0
        verdict = Verdict(problem="p", candidate=name, status=PASS, environment={PEAK_KEY: GIB},
                          config=config.to_dict())
        if name != "early" or not kept:
            verdict.precision["reference_on_device_bytes"] = kept
        first_outside = name == "outside" and self.calls.count("outside") == 1
        if crowded or name == "hog" or first_outside or (name in ("tight", "early") and kept):
            verdict.status, verdict.error = ERROR, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"
        if name == "fast" and (crowded or self.calls.count("fast") == 1 and self.running_others):
            verdict.status, verdict.error = FAIL, "impossible speed"
            verdict.flags.append(Flag("faster_than_floor", REJECT, "impossible speed", check="speed_of_light_floor"))
        return verdict

    running_others = False


def _pool(processes: int = 0, kept: int = 0) -> SharingPool:
    return SharingPool(JudgeConfig(device="cuda"), gpus=[0], per_gpu=3, warm=False, precompile=False,
                       free_bytes=lambda gpu: 80 * GIB, gpu_processes=lambda gpu: processes, kept=kept)


def test_an_oom_caused_by_sharing_the_gpu_is_retried_alone_and_passes():
    pool = _pool()
    with pool:
        first = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "c0"))])[0]  # measures the problem alone
        assert first.status == PASS and not first.flags
        verdicts = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", f"c{i}")) for i in (1, 2, 3)])
    retried = [v for v in verdicts if any(f.code == OOM_RETRIED for f in v.flags)]
    assert retried, "three evaluations that fit together should have shared the GPU and one run out of memory"
    assert all(v.status == PASS for v in verdicts)
    assert all(not [f for f in v.flags if f.code == OOM_ALONE] for v in verdicts)
    assert "co-scheduling" in retried[0].flags[0].message and "CUDA out of memory" in retried[0].flags[0].message
    assert len(pool.calls) == 4 + len(retried)


def test_an_oom_alone_is_the_candidates_own_and_is_not_retried():
    pool = _pool()
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "hog"))])[0]
    assert verdict.status == ERROR and is_oom(verdict)
    assert [f.code for f in verdict.flags] == [OOM_ALONE]
    assert pool.calls == ["hog"]


def test_an_oom_beside_the_judges_reference_outputs_is_judged_again_with_them_in_host_memory():
    pool = _pool(kept=12 * GIB)
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "tight"))])[0]
    assert verdict.status == PASS and pool.calls == ["tight", "tight"]
    assert pool.shares == [0.5, 0.0] and verdict.config["reference_device_share"] == 0.0
    [flag] = verdict.flags
    assert flag.code == OOM_REFERENCE_ON_HOST and "12.00 GiB of reference outputs" in flag.message
    assert "CUDA out of memory" in flag.message and "not held against the candidate" in flag.message


def test_an_oom_with_the_references_in_host_memory_too_is_the_candidates_own():
    pool = _pool(kept=12 * GIB)
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "hog"))])[0]
    assert verdict.status == ERROR and pool.shares == [0.5, 0.0]
    assert [f.code for f in verdict.flags] == [OOM_REFERENCE_ON_HOST, OOM_ALONE]


def test_an_oom_before_the_references_were_recorded_is_judged_again_with_them_in_host_memory():
    pool = _pool(kept=12 * GIB)
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "early"))])[0]
    assert verdict.status == PASS and pool.shares == [0.5, 0.0]
    assert [f.code for f in verdict.flags] == [OOM_REFERENCE_ON_HOST]
    assert "may keep reference outputs on the GPU" in verdict.flags[0].message


def test_an_oom_with_no_reference_output_on_the_gpu_is_not_judged_again():
    pool = SharingPool(JudgeConfig(device="cuda", reference_device_share=0.0), gpus=[0], per_gpu=1, warm=False,
                       precompile=False, free_bytes=lambda gpu: 80 * GIB, kept=12 * GIB)
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "hog"))])[0]
    assert verdict.status == ERROR and pool.calls == ["hog"]
    assert [f.code for f in verdict.flags] == [OOM_ALONE]


def test_an_oom_while_another_process_held_the_gpu_is_retried_too():
    pool = _pool(processes=2)  # e.g. another batch runner's workers
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "outside"))])[0]
    assert verdict.status == PASS and pool.calls == ["outside", "outside"]
    assert [f.code for f in verdict.flags] == [OOM_RETRIED] and "2 other process(es)" in verdict.flags[0].message


def test_cpu_lanes_are_not_admitted_by_memory():
    pool = SharingPool(JudgeConfig(device="cpu"), gpus=[], cpu_workers=2, warm=False,
                       free_bytes=lambda gpu: (_ for _ in ()).throw(AssertionError("asked for GPU memory")))
    with pool:
        verdicts = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "c0"))])
    assert verdicts[0].status == PASS


class TimedPool(JudgePool):
    """Evaluations replaced by a fake that sleeps (1 s for a candidate named "long", 0.1 s else),
    measures a peak of 1 GiB and records when each ended."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock, self.ended = threading.Lock(), {}

    def _run(self, job, config, env, phase):
        time.sleep(1.0 if job.candidate.name.startswith("long") else 0.1)
        with self.lock:
            self.ended[job.candidate.name] = time.monotonic()
        return Verdict(problem=job.problem.name, candidate=job.candidate.name, status=PASS,
                       environment={PEAK_KEY: GIB})


def test_a_job_waiting_for_room_does_not_hold_a_lane_other_jobs_could_use():
    # two lanes; problem a's second job waits for its first job's measurement: meanwhile the
    # other problems' jobs run on the free lane instead of queueing behind it
    pool = TimedPool(JudgeConfig(device="cuda"), gpus=[0], per_gpu=2, warm=False, precompile=False,
                     free_bytes=lambda gpu: 80 * GIB, gpu_processes=lambda gpu: 0)
    a = SourceText("class Model: pass  # a", "a")
    jobs = [JudgeJob(a, SourceText("x", "long1")), JudgeJob(a, SourceText("y", "long2"))]
    jobs += [JudgeJob(SourceText(f"class Model: pass  # {p}", p), SourceText("z", f"short-{p}")) for p in "bcd"]
    with pool:
        verdicts = pool.judge_many(jobs)
    assert all(v.status == PASS for v in verdicts)
    shorts = [pool.ended[f"short-{p}"] for p in "bcd"]
    assert max(shorts) < pool.ended["long1"], "the short jobs queued behind a job that waited for room"


def test_a_gpu_job_waiting_for_a_lane_can_still_be_cancelled():
    pool = TimedPool(JudgeConfig(device="cuda"), gpus=[0], per_gpu=1, warm=False, precompile=False,
                     free_bytes=lambda gpu: 80 * GIB, gpu_processes=lambda gpu: 0)
    with pool:
        busy = pool.submit_job(JudgeJob(SourceText("class Model: pass", "a"), SourceText("x", "long1")))
        time.sleep(0.2)
        waiting = pool.submit_job(JudgeJob(SourceText("class Model: pass  # b", "b"), SourceText("y", "short-b")))
        time.sleep(0.2)  # it has a thread and its memory admitted, but the only lane is busy
        assert waiting.cancel()
        assert busy.result(timeout=10).status == PASS
    assert "short-b" not in pool.ended


_BIG_RELU = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

batch_size = 512
dim = 1 << 20  # 2 GiB of float32 per input and per output

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return []
'''

_WORKSPACE_RELU = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        workspace = torch.empty({workspace}, dtype=torch.uint8, device=x.device)  # a large scratch buffer
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        del workspace
        return y
'''


@pytest.mark.gpu
def test_on_a_gpu_a_candidate_that_fits_only_without_the_kept_references_passes_judged_with_them_on_the_host():
    """A real worker: 2 GiB outputs, six cases kept on the GPU (12 GiB at share 0.5), and a candidate
    whose workspace fits beside one trial but not beside the kept references: the first run runs out
    of memory, the retry with every reference output in host memory passes."""
    import torch

    free, _ = torch.cuda.mem_get_info()
    workspace = free - 4 * GIB - 8 * GIB  # one input and one output, 8 GiB of room; the kept 12 GiB do not fit
    candidate = SourceText(_WORKSPACE_RELU.replace("{workspace}", str(workspace)), "relu_workspace")
    config = JudgeConfig(device="cuda", trials=5, baselines=(), reference_device_share=0.5)
    with JudgePool(config, per_gpu=1) as pool:
        [verdict] = pool.judge_many([JudgeJob(SourceText(_BIG_RELU, "big_relu"), candidate)])
    assert verdict.status == PASS, (verdict.error, [(f.code, f.message[:300]) for f in verdict.flags])
    codes = [f.code for f in verdict.flags if f.code.startswith("oom")]
    # this test's own process holds a CUDA context on the GPU: the pool may first judge it again alone
    assert codes in ([OOM_REFERENCE_ON_HOST], [OOM_RETRIED, OOM_REFERENCE_ON_HOST]), codes
    flag = verdict.flags[[f.code for f in verdict.flags].index(OOM_REFERENCE_ON_HOST)]
    assert "GiB of reference outputs" in flag.message and "CUDA out of memory" in flag.message
    assert verdict.precision["reference_on_device_bytes"] == 0 and verdict.config["reference_device_share"] == 0.0


def test_a_timing_rejection_while_sharing_the_gpu_is_judged_again_alone():
    """Another evaluation's work beside a timing can make a candidate look faster than the floor's
    peaks allow (peaks or floor measured while sharing): judged again alone before it is held
    against the candidate; alone, the verdict stands on its own."""
    from kernelwright.judge.scheduling.admission import TIMING_RETRIED

    pool = _pool(processes=1)
    pool.running_others = True
    with pool:
        verdict = pool.judge_many([JudgeJob(PROBLEM, SourceText("x", "fast"))])[0]
    assert pool.calls == ["fast", "fast"]
    assert verdict.status == PASS and any(f.code == TIMING_RETRIED and "faster_than_floor" in f.message
                                          for f in verdict.flags)
    alone = _pool(processes=0)
    alone.running_others = True
    with alone:
        verdict = alone.judge_many([JudgeJob(PROBLEM, SourceText("x", "fast"))])[0]
    assert alone.calls == ["fast"] and verdict.status == FAIL


def test_admission_is_per_gpu_a_full_gpu_does_not_hold_back_another():
    """Several GPUs: each has its own free memory and running jobs, not one global budget."""
    free = {"0": 20 * GIB, "1": 80 * GIB}
    admission = MemoryAdmission(free_bytes=lambda gpu: free[gpu], headroom_bytes=2 * GIB, margin=1.0)
    admission.record("k", 12 * GIB)
    first, second, third, release = threading.Event(), threading.Event(), threading.Event(), threading.Event()
    threading.Thread(target=_hold, args=(admission, "0", "k", first, release), daemon=True).start()
    assert first.wait(5)
    threading.Thread(target=_hold, args=(admission, "0", "k", second, release), daemon=True).start()
    assert not second.wait(0.5)  # 12 + 2 > 20 - 12 on GPU 0
    threading.Thread(target=_hold, args=(admission, "1", "k", third, release), daemon=True).start()
    assert third.wait(5)  # GPU 1 has room: its job starts while GPU 0's second still waits
    assert not second.is_set()
    assert [r.gpu for r in admission._running["0"]] == ["0"] and [r.gpu for r in admission._running["1"]] == ["1"]
    release.set()
    assert second.wait(5)
