"""Judge integrity on a GPU (issue 20): the CPU tests' attacks (tests/judge/test_integrity.py) with the
candidate on the device, and what confinement must not break there: CUDA, a Triton kernel compiled
in the candidate's own cache, a CUDA extension built by the trusted builder and found again, and
Nsight Compute profiling. Skipped without a GPU; run on the GPU machine:

    PYTHONPATH=. python -m pytest -q tests/judge/test_gpu_integrity.py
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import judge
from kernelwright.judge.verdict import PASS, REJECT

sys.path.insert(0, str(Path(__file__).parent))
from integrity_attacks import LEGIT, PROBLEM, alive, attacker, children, outcomes, package_copy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from judge_integrity import CUDA  # noqa: E402

pytestmark = pytest.mark.gpu
RECORD: dict = {}  # what the tests saw, written to $OUT/integrity_gpu_tests.json when OUT is set


@pytest.fixture(scope="module", autouse=True)
def record_for_the_lead():
    yield
    if os.environ.get("OUT") and RECORD:
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "integrity_gpu_tests.json").write_text(json.dumps(RECORD, indent=1, default=str))


def _note(name: str, verdict) -> None:
    RECORD[name] = {"status": verdict.status, "error": verdict.error, "stage_seconds": verdict.stage_seconds,
                    "confined": verdict.process.confined if verdict.process else None,
                    "killed": verdict.process.killed_processes if verdict.process else None,
                    "compile": verdict.compile.__dict__ if verdict.compile else None,
                    "median_ms": verdict.timing.median_ms if verdict.timing else None,
                    "isolation": verdict.process.isolation if verdict.process else None}


FAST = dict(trials=2, rules="kernelbench", device="cuda", baselines=("eager",), warmup_ms=5.0, rep_ms=30.0,
            min_reps=5, energy_ms=0.0)


@pytest.fixture(scope="module")
def gpu_arena(tmp_path_factory):
    root = tmp_path_factory.mktemp("gpu_integrity")
    package_copy(root / "pkg")
    other = root / "scratch" / "kw-judge-other"
    other.mkdir(parents=True)
    (other / "secret.txt").write_text("another candidate's kernel")
    config = JudgeConfig(cache_dir=str(root / "cache"), **FAST)
    env, scratch = {"PYTHONPATH": str(root / "pkg")}, root / "scratch"
    before = judge(PROBLEM, LEGIT, config, env=env, scratch_root=scratch)
    records = {p.name: p.read_bytes() for p in (root / "cache" / "baselines").glob("*.json")}
    candidate = attacker(root / "outside.txt", root / "cache" / "baselines", other / "secret.txt")
    attacked = judge(PROBLEM, candidate, config, env=env, scratch_root=scratch)
    after = judge(PROBLEM, LEGIT, config, env=env, scratch_root=scratch)
    for name, verdict in (("legit_before", before), ("attacker", attacked), ("legit_after", after)):
        _note(name, verdict)
    RECORD["attack_outcomes"] = outcomes(attacked.process.stdout_tail)
    return root, before, attacked, after, records


def test_on_the_gpu_every_attack_is_blocked_or_caught(gpu_arena):
    root, before, attacked, after, records = gpu_arena
    assert before.status == PASS and before.device.startswith("cuda"), before.error
    assert attacked.status == PASS and attacked.process.confined, attacked.error
    seen = outcomes(attacked.process.stdout_tail)
    for attack in ("write_outside", "write_package", "plant_module", "append_baseline", "forge_record",
                   "read_other_scratch", "signal_supervisor"):
        assert seen[attack].startswith("blocked: PermissionError"), (attack, seen[attack])
    assert seen["read_environment"] == "done: []"
    assert not (root / "outside.txt").exists()
    pids = children(attacked.process.stdout_tail)
    assert len(pids) == 2 and not [p for p in pids if alive(p)] and attacked.process.killed_processes == 2


def test_on_the_gpu_the_next_legitimate_candidate_is_judged_as_before(gpu_arena):
    root, before, _, after, records = gpu_arena
    assert after.status == PASS and after.process.killed_processes == 0
    assert not [f for f in after.flags if f.severity == REJECT]
    assert after.baselines.cached and after.baselines.eager == before.baselines.eager
    assert {p.name: p.read_bytes() for p in (root / "cache" / "baselines").glob("*.json")} == records
    assert after.timing.median_ms < 3 * before.timing.median_ms  # no leftover process competing


def test_a_triton_kernel_compiles_in_the_candidates_own_cache(tmp_path):
    verdict = judge(PROBLEM, LEGIT, JudgeConfig(cache_dir=str(tmp_path / "cache"), **FAST))
    _note("triton", verdict)
    assert verdict.status == PASS and verdict.process.confined, verdict.error
    assert not (tmp_path / "cache" / "triton").exists() or not any((tmp_path / "cache" / "triton").iterdir())


def test_a_cuda_extension_is_built_by_the_trusted_builder_then_found(tmp_path):
    config = JudgeConfig(cache_dir=str(tmp_path / "cache"), compile_timeout_s=500.0, **FAST)
    cold = judge(PROBLEM, CUDA, config)
    _note("cuda_cold", cold)
    assert cold.status == PASS and cold.process.confined, cold.error
    assert cold.compile.ok and not cold.compile.cached and cold.compile.backend == "cuda"
    builds = [p for p in (tmp_path / "cache" / "torch_extensions").iterdir() if p.name.startswith("kw_bench_affine_")]
    assert len(builds) == 1 and (builds[0] / "kw_build.json").is_file()
    warm = judge(PROBLEM, CUDA, config)
    _note("cuda_warm", warm)
    assert warm.status == PASS and warm.compile.cached, warm.compile.log


def test_profiling_runs_confined(tmp_path):
    """The profile's processes (the timeline runner; ncu's target, where ncu is installed) are started
    by the supervisor and confined afresh (judge/profilehost.py, judge/launch.py): CUDA works there
    (its driver writes the process's own /proc entries), candidate code is confined, and only
    CAP_SYS_ADMIN (counters may be admin-only) is kept."""
    from kernelwright.profile.ncu import find_ncu

    verdict = judge(PROBLEM, LEGIT, JudgeConfig(cache_dir=str(tmp_path / "cache"), profile=True, **FAST))
    _note("profiled", verdict)
    launched = verdict.process.isolation.get("profiled_processes") or [] if verdict.process else []
    RECORD["profile"] = {k: verdict.profile.get(k) for k in ("status", "findings", "overhead_s", "device")} \
        if verdict.profile else None
    RECORD["profiled_processes"] = launched
    RECORD["profile_network"] = verdict.process.isolation.get("profile_network") if verdict.process else None
    assert verdict.status == PASS and verdict.process.confined, verdict.error
    assert verdict.process.isolation["confinement"]["capabilities"] in ("dropped all except CAP_SYS_ADMIN", "none held")
    assert launched and all(p["confined"] and p["own_proc_writable"] for p in launched), launched
    assert verdict.profile["device"].startswith("NVIDIA"), verdict.profile.get("findings")  # CUDA in the runner
    wanted = "ok" if find_ncu() else "partial"
    assert verdict.profile["status"] == wanted, verdict.profile.get("findings")
    if find_ncu():
        assert {p["action"] for p in launched} == {"run", "collect"}, launched
