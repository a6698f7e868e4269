"""Tuning tests never touch the user's tuning cache: the default one lives in a scratch folder."""
import pytest


@pytest.fixture(autouse=True)
def scratch_tune_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "tune-cache"))
