"""The end-to-end runs judge on the CPU in subprocesses: they get judge caches of their own, and
with them a CPU timing lock of their own (judge/gpulock.py keeps the CPU's lock in the cache
folder). With the user's cache they would wait for whatever else judges on this machine (another
test session, a user's run timing a large problem for minutes), and a test's bounded wait would
measure the neighbours, not the code under test."""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def own_judge_cache(tmp_path_factory):
    saved = os.environ.get("KW_CACHE_DIR")
    os.environ["KW_CACHE_DIR"] = str(tmp_path_factory.mktemp("e2e-judge-cache"))
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("KW_CACHE_DIR", None)
        else:
            os.environ["KW_CACHE_DIR"] = saved
