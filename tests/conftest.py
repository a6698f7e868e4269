"""Shared test setup: GPU tests are skipped without a GPU; KernelBench problems come from ../shared."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_KB = Path(os.environ.get("KW_KERNELBENCH", REPO.parent / "shared" / "kernelbench"))


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 -- torch missing or broken: no GPU either way
        return False


# `kernelwright judge` calls made by tests judge in their own process (a daemon would outlive the
# test); tests/judge/test_daemon.py turns the daemon on for its own calls.
os.environ.setdefault("KW_JUDGE_DAEMON", "0")
# Long commands print a heartbeat line on stderr after KW_HEARTBEAT_S seconds of silence; a test
# whose command runs long on a loaded machine would find it in output it reads (CliRunner's
# `output` holds stderr too). Tests of the heartbeat set their own interval.
os.environ.setdefault("KW_HEARTBEAT_S", "86400")
# A new optimize run writes and judges torch.compile's kernels before round 1 by default (search
# setting seed_start, docs/seed.md): minutes of inductor on a CPU and one more ask in every run's
# journal. Tests of runs leave it off; tests of the start (tests/search/test_start.py) turn it on.
os.environ.setdefault("KW_SEED_START", "0")

if not _cuda_available():
    # Triton candidates run on the CPU through the interpreter; judged subprocesses inherit this.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def kernelbench() -> Path:
    """Folder of the shared KernelBench problems; tests that need it skip when it is absent."""
    if not SHARED_KB.is_dir():
        pytest.skip(f"KernelBench problems not found at {SHARED_KB}")
    return SHARED_KB


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory) -> str:
    """A real local Ray instance with two CPU workers for the whole session (started on first use,
    a few seconds); its GCS address, for drivers in other processes (`--eval ray:ADDRESS`). No GPUs
    even on a GPU machine, so its judge actors are CPU actors everywhere."""
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install -e '.[test]' brings it)")
    # judge caches (and the CPU timing lock) of its own: not shared with whatever else runs here
    saved = os.environ.get("KW_CACHE_DIR")
    os.environ["KW_CACHE_DIR"] = str(tmp_path_factory.mktemp("ray-judge-cache"))
    try:
        ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
    finally:  # the cluster's processes keep it; this process goes back to its own
        if saved is None:
            os.environ.pop("KW_CACHE_DIR")
        else:
            os.environ["KW_CACHE_DIR"] = saved
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
