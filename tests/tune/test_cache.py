"""The tuning cache: one record per (template hash, parameters, device, sizes, context)."""
from kernelwright.tune.cache import TuneCache


def test_put_get_and_key_parts(tmp_path):
    cache = TuneCache(tmp_path / "c.sqlite")
    record = {"status": "pass", "time_ms": 1.5}
    cache.put("t1", {"B": 64, "w": 4}, "H100", {"n": 8}, record, context="judge-a")
    assert cache.get("t1", {"w": 4, "B": 64}, "H100", {"n": 8}, context="judge-a") == record  # order-free
    assert cache.get("t1", {"B": 64, "w": 4}, "A100", {"n": 8}, context="judge-a") is None
    assert cache.get("t1", {"B": 64, "w": 4}, "H100", {"n": 16}, context="judge-a") is None
    assert cache.get("t2", {"B": 64, "w": 4}, "H100", {"n": 8}, context="judge-a") is None
    assert cache.get("t1", {"B": 64, "w": 4}, "H100", {"n": 8}, context="judge-b") is None
    assert len(cache) == 1


def test_persists_and_replaces(tmp_path):
    path = tmp_path / "c.sqlite"
    first = TuneCache(path)
    first.put("t", {"B": 1}, "cpu", {}, {"time_ms": 2.0})
    first.put("t", {"B": 1}, "cpu", {}, {"time_ms": 1.0})
    first.close()
    again = TuneCache(path)
    assert again.get("t", {"B": 1}, "cpu", {}) == {"time_ms": 1.0} and len(again) == 1


def test_default_location_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("KW_TUNE_CACHE", str(tmp_path / "here"))
    cache = TuneCache()
    assert cache.path.parent == tmp_path / "here"


def test_a_run_folder_carries_its_own_cache(tmp_path):
    from kernelwright.tune.cache import run_cache

    cache = run_cache(tmp_path / "run")
    cache.put("t", {"B": 1}, "cpu", {}, {"time_ms": 1.0})
    assert cache.path == tmp_path / "run" / "tune_cache.sqlite"
    assert run_cache(tmp_path / "run").get("t", {"B": 1}, "cpu", {}) == {"time_ms": 1.0}
