"""The trusted builder: what it publishes, under which hash, and what a candidate's process gets back.
The real, confined g++ build is the last (slow) test; the others replace the builder process."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from kernelwright.judge import buildcache, buildlog, buildservice, compile as kwc, service
from kernelwright.judge.toolchain import toolchain

REPO = Path(__file__).resolve().parents[2]
CPP = "torch::Tensor f(torch::Tensor x) { return x; }"


@pytest.fixture
def fake_builder(monkeypatch):
    """Stands in for the confined builder process: 'builds' by writing the library file."""
    runs = []

    def run(builder, arguments, arch, staging, timeout_s, readable, on_start):
        runs.append(dict(arguments))
        if "BROKEN" in json.dumps(arguments):
            return False, "main.cpp:1:1: error: BROKEN is not a type", 0.1
        (staging / f"{arguments['name']}.so").write_bytes(b"fake library")
        (staging / buildlog.LOG_FILE).write_text("[1/1] fake build")
        return True, "[1/1] fake build", 0.1

    monkeypatch.setattr(buildservice, "_run_builder", run)
    return runs


def _request(cpp=CPP, **extra):
    return {"op": "build", "builder": "load_inline", "arch": "9.0",
            "arguments": {"name": "ext", "cpp_sources": cpp, "functions": ["f"], **extra}}


def test_a_build_is_published_under_the_hash_of_what_was_received_then_found(tmp_path, fake_builder):
    reply = buildservice.serve_build(_request(), tmp_path, timeout_s=60)
    expected = buildcache.hashed_name("ext", buildcache.build_hash(
        "load_inline", {"name": "ext", "cpp_sources": CPP, "functions": ["f"]}, arch="9.0", tools=toolchain()))
    assert reply["ok"] and not reply["cached"] and reply["name"] == expected
    folder = Path(reply["dir"])
    assert folder == tmp_path / "torch_extensions" / expected
    marker = json.loads((folder / buildcache.BUILD_MARKER).read_text())
    assert marker["built_by"] == "kernelwright.judge.builder" and marker["arch"] == "9.0"
    assert not list((tmp_path / "torch_extensions" / buildservice.STAGING).iterdir())  # nothing left staged
    again = buildservice.serve_build(_request(), tmp_path, timeout_s=60)
    assert again["cached"] and again["name"] == expected and len(fake_builder) == 1


def test_the_flags_are_part_of_the_hash(tmp_path, fake_builder):
    plain = buildservice.serve_build(_request(), tmp_path, timeout_s=60)
    odd = buildservice.serve_build(_request(extra_cflags=["-ccbin", "/somewhere/evil"]), tmp_path, timeout_s=60)
    assert plain["name"] != odd["name"] and len(fake_builder) == 2


def test_load_sources_are_copied_before_they_are_hashed(tmp_path, fake_builder):
    source = tmp_path / "kernel.cpp"
    source.write_text(CPP)
    message = {"builder": "load", "arch": "none", "arguments": {"name": "ext", "sources": [str(source)]}}
    reply = buildservice.serve_build(message, tmp_path / "cache", timeout_s=60)
    built_from = Path(fake_builder[0]["sources"][0])
    assert built_from != source and built_from.name == "kernel.cpp"  # the staged copy was built
    client_hash = buildcache.build_hash("load", {"name": "ext", "sources": [str(source)]}, arch="none",
                                 tools=toolchain())
    assert reply["name"] == buildcache.hashed_name("ext", client_hash)  # the candidate finds it by its own hash


def test_a_failed_build_publishes_nothing(tmp_path, fake_builder):
    reply = buildservice.serve_build(_request(cpp="BROKEN"), tmp_path, timeout_s=60)
    assert not reply["ok"] and "BROKEN is not a type" in reply["log"]
    assert sorted(p.name for p in (tmp_path / "torch_extensions").iterdir()) == [".locks", buildservice.STAGING]


@pytest.mark.parametrize("bad", [{"arguments": {"name": "../x", "cpp_sources": ""}},
                                 {"arguments": {"name": "ok", "cpp_sources": ""}, "arch": "9.0; rm -rf /"},
                                 {"builder": "os.system", "arguments": {"name": "ok"}}])
def test_requests_that_are_not_builds_are_refused(tmp_path, bad):
    with pytest.raises(ValueError):
        buildservice.serve_build({"builder": "load_inline", "arch": "9.0", **bad}, tmp_path, timeout_s=60)


def test_a_candidate_process_builds_through_its_supervisor_and_loads_the_result(tmp_path, fake_builder, monkeypatch):
    import torch.utils.cpp_extension as cpp

    server = service.Server(tmp_path, {"build": lambda m: buildservice.serve_build(m, tmp_path / "cache", 60)})
    server.start()
    monkeypatch.setenv(service.ENV_VAR, str(server.path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setattr(cpp, "_import_module_from_library",
                        lambda name, path, is_python_module: types.SimpleNamespace(name=name, path=path))
    try:
        recorder = kwc.install_build_cache(tmp_path / "cache")
        module = cpp.load_inline("ext", CPP, functions=["f"])
        assert module.path.startswith(str(tmp_path / "cache" / "torch_extensions"))
        first = recorder.result()
        assert first.ok and not first.cached and first.arch == "9.0"
        recorder = kwc.install_build_cache(tmp_path / "cache")  # a new process: found without asking
        cpp.load_inline("ext", CPP, functions=["f"])
        assert recorder.result().cached and recorder.records[0].log.endswith("(cache hit)")
        with pytest.raises(RuntimeError, match="BROKEN is not a type"):
            cpp.load_inline("ext", "BROKEN", functions=["f"])
        assert len(fake_builder) == 2
    finally:
        kwc.uninstall_build_cache()
        server.close()


_MAP_OUTSIDE = r"""
import sys
from pathlib import Path
from kernelwright.judge import buildservice
cache, outside = Path(sys.argv[1]), sys.argv[2]
cpp = "int twice(int x) { return 2 * x; }"
plain = {"builder": "load_inline", "arch": "none",
         "arguments": {"name": "kw_twice", "cpp_sources": cpp, "functions": ["twice"]}}
print(buildservice.serve_build(plain, cache, timeout_s=600)["ok"], flush=True)
sneaky = {"builder": "load_inline", "arch": "none",
          "arguments": {"name": "kw_twice", "cpp_sources": cpp, "functions": ["twice"],
                        "extra_ldflags": ["-Wl,-Map=" + outside]}}
print(buildservice.serve_build(sneaky, cache, timeout_s=600)["ok"], flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_real_builder_is_confined_to_its_staging_folder(tmp_path):
    """A g++ build through the confined builder works; one whose linker flags write a file outside
    the staging folder fails and publishes nothing (the file is never written)."""
    from kernelwright.judge.confine import landlock_abi

    if landlock_abi()[0] < 1:
        pytest.skip("no Landlock here")
    outside = tmp_path / "outside.map"
    done = subprocess.run([sys.executable, "-c", _MAP_OUTSIDE, str(tmp_path / "cache"), str(outside)],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(REPO), "MAX_JOBS": "1"})
    assert done.stdout.split() == ["True", "False"], done.stderr[-3000:]
    assert not outside.exists()
    published = [p.name for p in (tmp_path / "cache" / "torch_extensions").iterdir() if not p.name.startswith(".")]
    assert len(published) == 1


def test_load_reads_no_source_the_candidate_could_not_read_itself(tmp_path, fake_builder):
    own, other = tmp_path / "kw-judge-own", tmp_path / "kw-judge-other"
    for folder in (own, other):
        folder.mkdir()
        (folder / "kernel.cpp").write_text(CPP)
    message = {"builder": "load", "arch": "none", "arguments": {"name": "ext", "sources": [str(other / "kernel.cpp")]}}
    with pytest.raises(ValueError, match="another candidate's scratch"):
        buildservice.serve_build(message, tmp_path / "cache", timeout_s=60, readable=own)
    message["arguments"]["sources"] = ["/dev/zero"]
    with pytest.raises(ValueError, match="not a regular source file"):
        buildservice.serve_build(message, tmp_path / "cache", timeout_s=60, readable=own)
    message["arguments"]["sources"] = [str(own / "kernel.cpp")]
    assert buildservice.serve_build(message, tmp_path / "cache", timeout_s=60, readable=own)["ok"]
