"""The batch runner's baselines-ahead lane (judge/scheduling/baseline_lane.py): each problem once, first-judged
first, into the very cache record a candidate's supervisor reads; failures leave no record; the
lane takes no seat in the memory admission and dies with the batch."""
from __future__ import annotations

import dataclasses
import textwrap
import threading
import time
from pathlib import Path

import pytest
from proc_tree import alive

from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling import baseline_lane as lanes
from kernelwright.judge import proctree
from kernelwright.judge.scheduling.admission import GIB, OOM_RETRIED, MemoryAdmission, run_admitted
from kernelwright.judge.request import SourceText, make_request
from kernelwright.judge.scheduling.pool import JudgeJob
from kernelwright.judge.supervisor import Supervisor, device_label
from kernelwright.judge.verdict import ERROR, PASS, Verdict

# hand-written tiny problems in KernelBench format (each measured in milliseconds on the CPU)
TINY = textwrap.dedent("""\
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x) * {scale}

    size = 64

    def get_inputs():
        return [torch.randn(8, size)]

    def get_init_inputs():
        return []
    """)
SLOW_TO_LOAD = "import time\ntime.sleep(120)\n" + TINY.format(scale=1.0)


@pytest.fixture
def config(tmp_path):
    """The CPU at the problem's own sizes (shrinking decides sizes only once loaded: no lane then)."""
    return JudgeConfig(device="cpu", shrink=False, warmup_ms=1.0, rep_ms=5.0, min_reps=3, max_reps=20,
                       cache_dir=str(tmp_path / "cache"), timeout_s=120.0, trials=1)


class _Pool:
    """What the lane reads of a JudgePool: its settings, devices, evaluation environments, admission."""

    def __init__(self, config, envs=({},), admission=None):
        self.config, self.gpus, self._envs, self.admission = config, [], [dict(e) for e in envs], admission

    def device_envs(self):
        return self._envs


def _problem(tmp_path: Path, name: str, scale: float) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(TINY.format(scale=scale))
    return path


def _job(problem, config, name="c") -> JudgeJob:
    return JudgeJob(problem, SourceText("class ModelNew: pass", name), config, name)


def _cache_records(config) -> list[Path]:
    return sorted((Path(config.cache_dir) / "baselines").glob("*.json"))


def test_each_problem_once_first_judged_first_and_only_where_baselines_are_asked(tmp_path, config):
    a, b = _problem(tmp_path, "a", 1.0), _problem(tmp_path, "b", 2.0)
    as_text = SourceText(TINY.format(scale=3.0), "from text")
    jobs = [_job(b, config), _job(as_text, config), _job(b, config), _job(a, config),
            _job(_problem(tmp_path, "untimed", 4.0), dataclasses.replace(config, time=False)),
            _job(_problem(tmp_path, "shrunk", 5.0), dataclasses.replace(config, shrink=None)),  # CPU: shrinks
            _job(a, dataclasses.replace(config, trials=7))]  # settings that do not change a baseline
    scratch = tmp_path / "lane"
    tasks = lanes.plan(jobs, _Pool(config), scratch)
    assert [t.name for t in tasks] == ["b.py", "from_text.py", "a.py"]
    copy = tasks[1].problem
    assert copy.name == "from_text.py" and copy.read_text() == as_text.text and copy.is_relative_to(scratch)
    seen = []

    def fake(task, env, lane):
        seen.append(task.name)
        return lanes.LaneResult(task, lanes.MEASURED, kinds=["eager"])

    lane = lanes.BaselineLane(tasks, _Pool(config), scratch, lanes=1, measure=fake).start()
    lane.join(30)
    assert seen == ["b.py", "from_text.py", "a.py"]
    assert [r.outcome for r in lane.results] == [lanes.MEASURED] * 3


def test_the_lane_writes_the_record_the_supervisor_reads(tmp_path, config, monkeypatch):
    """A real lane (child process, real eager measurement) for a problem given as text; then the
    supervisor of a candidate of it, asked for baselines as the worker asks, reads the lane's record."""
    problem = SourceText(TINY.format(scale=2.0), "17_tiny relu")
    lane = lanes.start([_job(problem, config)], _Pool(config), lanes=2)
    lane.join(300)
    assert [(r.outcome, r.kinds) for r in lane.results] == [(lanes.MEASURED, ["eager"])], lane.results[0].errors
    lane.stop()
    records = _cache_records(config)
    assert len(records) == 1 and records[0].name.startswith("17_tiny_relu__eager__")
    assert not lane.scratch.exists()

    supervisor = _supervisor_of(tmp_path / "eval", problem, config, monkeypatch)
    reply = supervisor._baselines({})["baselines"]
    assert reply["measured"]["eager"]["from_cache"], reply  # a miss would have measured it again
    assert reply["measured"]["eager"]["cache_file"] == records[0].name
    assert _cache_records(config) == records


def _supervisor_of(scratch: Path, problem, config, monkeypatch) -> Supervisor:
    """A candidate's supervisor as the pool makes it, sealed as its worker seals it (CPU)."""
    from kernelwright.judge import proctree as tree

    monkeypatch.setattr(tree, "become_subreaper", lambda: False)  # not this test process
    scratch.mkdir(parents=True)
    request = make_request(problem, SourceText("class ModelNew: pass", "c"), config, scratch)
    request.save(scratch / "request.json")
    supervisor = Supervisor(scratch / "request.json", "evaluate", parent_pid=0)
    supervisor.prepare()
    assert supervisor._seal({"overrides": dict(config.overrides), "device": "cpu", "device_name": ""}) == {"ok": True}
    return supervisor


def test_a_lane_failure_leaves_no_record_and_the_supervisor_measures_it(tmp_path, config, monkeypatch):
    problem = _problem(tmp_path, "tiny", 2.0)
    hurried = dataclasses.replace(config, timeout_s=0.01)  # the same baseline key, no time to measure it
    lane = lanes.start([_job(problem, hurried)], _Pool(hurried), lanes=1)
    lane.join(300)
    lane.stop()
    assert [r.outcome for r in lane.results] == [lanes.FAILED] and "timed out" in lane.results[0].errors["eager"]
    assert _cache_records(config) == []
    reply = _supervisor_of(tmp_path / "eval", problem, config, monkeypatch)._baselines({})["baselines"]
    assert reply["eager"]["median_ms"] > 0 and not reply["measured"]["eager"]["from_cache"]
    assert len(_cache_records(config)) == 1


def test_a_cached_problem_costs_a_look_not_a_process(tmp_path, config):
    problem = _problem(tmp_path, "tiny", 2.0)
    first = lanes.start([_job(problem, config)], _Pool(config), lanes=1)
    first.join(300)
    first.stop()
    assert [r.outcome for r in first.results] == [lanes.MEASURED]

    def no_process(task, env, lane):
        raise AssertionError("a cached problem must not start a measurement")

    tasks = lanes.plan([_job(problem, config)], _Pool(config), tmp_path / "again")
    again = lanes.BaselineLane(tasks, _Pool(config), tmp_path / "again", lanes=1, measure=no_process).start()
    again.join(60)
    assert [r.outcome for r in again.results] == [lanes.CACHED]


def test_stop_kills_the_measurement_in_flight_and_its_baseline_processes(tmp_path, config):
    problem = tmp_path / "slow.py"
    problem.write_text(SLOW_TO_LOAD)
    lane = lanes.start([_job(problem, config)], _Pool(config), lanes=1)
    deadline, tree = time.monotonic() + 120, set()
    while time.monotonic() < deadline and not any("kernelwright.judge.baseline" in _cmdline(p) and
                                                  "baseline_lane" not in _cmdline(p) for p in tree):
        time.sleep(0.2)
        with lane._guard:
            children = [c.pid for c in lane._children]
        tree = set(children) | {d for c in children for d in proctree.descendants(c)}
    assert tree, "the lane's child and its baseline process never started"
    lane.stop()
    assert lane.results[0].outcome == lanes.STOPPED
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in tree):
        time.sleep(0.1)
    assert not [p for p in tree if alive(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_the_lane_names_a_gpu_as_the_supervisor_does(tmp_path, config, monkeypatch):
    """The lane's child runs with the evaluation's CUDA_VISIBLE_DEVICES, so `supervisor.device_label`
    there names the same GPU as in a candidate's supervisor; the runner's own look at the cache
    (`env.device_name_without_torch` with that environment) agrees with it."""
    from kernelwright.judge import env as kwenv

    names = {"3": "NVIDIA H100 80GB HBM3", "0": "some other GPU"}
    monkeypatch.setattr(kwenv, "_run", lambda *args: names.get(args[-1], ""))
    pool = _Pool(config)
    pool.gpus = [3]
    task = lanes.plan([_job(_problem(tmp_path, "t", 1.0), dataclasses.replace(config, device="auto"))], pool,
                      tmp_path / "lane")[0]
    assert task.device == "cuda"
    child = lanes.child_env(task, {"CUDA_VISIBLE_DEVICES": "3"}, tmp_path / "lane")
    assert child["CUDA_VISIBLE_DEVICES"] == "3" and child["KW_CACHE_DIR"] == task.config.cache_dir
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")  # a candidate's supervisor on that GPU
    assert kwenv.device_name_without_torch("cuda", child) == device_label("cuda", "") == "NVIDIA H100 80GB HBM3"


def test_the_lane_takes_no_seat_and_a_candidate_oom_beside_it_is_retried(tmp_path, config):
    """The lane reserves nothing in the pool's admission (seats starved the candidates on the H100);
    an OOM while its process holds memory on the GPU counts as sharing it and is judged again."""
    holders = []  # processes holding memory on the GPU: the lane's while it measures
    admission = MemoryAdmission(free_bytes=lambda gpu: 80 * GIB, gpu_processes=lambda gpu: len(holders), margin=1.25)
    pool = _Pool(dataclasses.replace(config, device="auto"), envs=[{"CUDA_VISIBLE_DEVICES": "0"}], admission=admission)
    pool.gpus = [0]
    task = lanes.plan([_job(_problem(tmp_path, "t", 1.0), pool.config)], pool, tmp_path / "lane")[0]
    seated, release, events = threading.Event(), threading.Event(), []

    def measure(task, env, lane):
        holders.append("lane")
        events.append(("lane", list(admission._running.get("0", []))))
        seated.set()
        release.wait(10)
        holders.remove("lane")
        return lanes.LaneResult(task, lanes.MEASURED)

    lane = lanes.BaselineLane([task], pool, tmp_path / "lane", lanes=1, measure=measure).start()
    assert seated.wait(30)
    runs = []

    def run():  # out of memory the first time (beside the lane), then passes
        runs.append(len(holders))
        if len(runs) == 1:
            return Verdict(problem="p", candidate="c", status=ERROR, error="torch.OutOfMemoryError: CUDA out of memory")
        return Verdict(problem="p", candidate="c", status=PASS)

    verdict = run_admitted(admission, "0", "the candidate's problem", run)
    release.set()
    lane.join(10)
    assert events[0] == ("lane", [])  # measuring, and no seat taken
    assert verdict.status == PASS and any(f.code == OOM_RETRIED for f in verdict.flags)
    assert "1 other process(es)" in next(f.message for f in verdict.flags if f.code == OOM_RETRIED)


def test_the_batch_runner_runs_the_lane_and_its_verdict_uses_the_lane_measurement(tmp_path, config, kernelbench):
    """A real batch on the CPU: the lane measures the problem once; the candidate's verdict has its
    eager baseline from the same record (read from the cache, or the lane's measurement waited for)."""
    from kernelwright.judge.scheduling.batch import run_batch
    from kernelwright.judge.scheduling.batch_folder import read_verdicts, write_request
    from kernelwright.judge.scheduling.pool import JudgePool

    config = dataclasses.replace(config, overrides={"batch_size": 4, "dim": 256})
    candidate = (Path(__file__).parents[1] / "candidates" / "relu_correct.py").read_text()
    folder = tmp_path / "evals"
    write_request(folder, "first", kernelbench / "level1" / "19_ReLU.py", candidate, config)
    logged: list[str] = []
    with JudgePool(config, cpu_workers=1, warm=False) as pool:
        judged = run_batch(folder, pool, log=logged.append, baseline_lanes=2)
    assert judged == ["first"]
    verdict = read_verdicts(folder)["first"]
    assert verdict.status == PASS, verdict.error
    records = _cache_records(config)
    assert len(records) == 1 and verdict.baselines.measured["eager"]["cache_file"] == records[0].name
    lane_lines = [line for line in logged if line.startswith("baseline lane:")]
    measured_by_lane = any("19_ReLU.py: measured eager" in line for line in lane_lines)
    # measured once: by the lane (the verdict read it) or, had the candidate come first, by its judge
    assert measured_by_lane == verdict.baselines.measured["eager"]["from_cache"], lane_lines
    assert lane_lines[-1].startswith("baseline lane: 1 ")  # the summary when the batch ended


def test_the_option_reaches_the_runner(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from kernelwright.cli.app import app
    from kernelwright.judge.scheduling import batch

    seen = []
    monkeypatch.setattr(batch, "judge_folders", lambda *args, **kwargs: seen.append(
        kwargs.get("baseline_lanes", args[6] if len(args) > 6 else None)) or [])
    monkeypatch.setattr(batch, "JudgePool", lambda *a, **k: object())
    assert batch.main([str(tmp_path), "--baseline-lanes", "3"]) == 0
    assert batch.main([str(tmp_path)]) == 0
    done = CliRunner().invoke(app, ["judge", "--batch", str(tmp_path), "--baseline-lanes", "0"])
    assert done.exit_code == 0, done.output
    assert seen == [3, lanes.DEFAULT_LANES, 0]


_NO_TORCH = r"""
import sys
from pathlib import Path
from kernelwright.judge import JudgeConfig
from kernelwright.judge.scheduling import batch, baseline_lane, reference_timing
from kernelwright.judge.baseline import missing_kinds
from kernelwright.judge.scheduling.pool import JudgeJob, JudgePool
from kernelwright.judge.request import SourceText
problem = Path(sys.argv[1])
config = JudgeConfig(device="cpu", shrink=False, cache_dir=sys.argv[2])
tasks = baseline_lane.plan([JudgeJob(problem, SourceText("x = 1", "c"), config)], JudgePool(config), problem.parent)
env = baseline_lane.child_env(tasks[0], {}, problem.parent)
assert missing_kinds(tasks[0].problem, {}, tasks[0].config, "cpu", "cpu:x") == ["eager"]
print("torch" in sys.modules, "triton" in sys.modules)
"""


def test_the_runner_side_of_the_lane_never_imports_torch(tmp_path):
    import subprocess
    import sys

    problem = _problem(tmp_path, "t", 1.0)
    done = subprocess.run([sys.executable, "-c", _NO_TORCH, str(problem), str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "False"], done.stderr


@pytest.mark.gpu
def test_on_a_gpu_the_verdicts_read_the_lane_measurements(tmp_path, kernelbench):
    """On the GPU (nvidia-smi names the device for the lane, the worker's supervisor likewise): the
    lane measures eager and torch.compile for the problem of two candidates, at the same time; the
    verdicts' baselines are those records, measured once."""
    from kernelwright.judge.scheduling.batch import run_batch
    from kernelwright.judge.scheduling.batch_folder import read_verdicts, write_request
    from kernelwright.judge.scheduling.pool import JudgePool

    config = JudgeConfig(cache_dir=str(tmp_path / "cache"), overrides={"batch_size": 256}, trials=2)
    candidate = (Path(__file__).parents[1] / "candidates" / "relu_correct.py").read_text()
    folder = tmp_path / "evals"
    for name in ("one", "two"):
        write_request(folder, name, kernelbench / "level1" / "19_ReLU.py", candidate, config)
    logged: list[str] = []
    with JudgePool(config) as pool:
        run_batch(folder, pool, log=logged.append, baseline_lanes=2)
    records = {p.name for p in _cache_records(config)}
    assert len(records) == 2, logged
    for verdict in read_verdicts(folder).values():
        assert verdict.status == PASS, verdict.error
        assert {verdict.baselines.measured[k]["cache_file"] for k in ("eager", "compile_default")} == records
    lane_lines = [line for line in logged if line.startswith("baseline lane:")]
    measured = [v.baselines.measured[k]["from_cache"] for v in read_verdicts(folder).values()
                for k in ("eager", "compile_default")]
    if any("19_ReLU.py: measured eager, compile_default" in line for line in lane_lines):
        assert all(measured), lane_lines  # every verdict read the lane's records
    print("\n".join(lane_lines))
