"""compile.py: build-cache naming and wiring, cross-process locking, and compiler-log trimming."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch.utils.cpp_extension as cpp

from kernelwright.judge import buildcache, buildlog
from kernelwright.judge import compile as kwc

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).resolve().parents[2]
TOOLS = {"nvcc": "release 13.0", "cxx": "g++ 12", "torch": "2.13", "torch_cuda": "None", "python": "3.11",
         "abi": "cpython-311"}
CUDA_SRC = "__global__ void k(float* x) { x[threadIdx.x] = 1.f; }\ntorch::Tensor f(torch::Tensor x) { return x; }"
CPP_SRC = "torch::Tensor f(torch::Tensor x);"


# ---------------------------------------------------------------- trim_errors on captured logs


def test_trim_nvcc_errors_map_to_cuda_sources_lines():
    errors = buildlog.trim_errors((DATA / "nvcc_ninja_error.log").read_text(), rename=buildlog.INLINE_FILES)
    assert errors[0].startswith('cuda_sources line 3: error: identifier "blockIdxx" is undefined')
    assert "int i = blockIdxx.x * blockDim.x" in errors[0]  # one line of source context
    assert errors[1].startswith('cuda_sources line 11: error: expected a ";"')
    assert errors[-1] == "ninja: FAILED building cuda.cuda.o"  # least informative last
    assert not any("nvcc  -D" in e for e in errors)  # the long command lines are dropped


def test_trim_gcc_error_keeps_the_quoted_source_line():
    errors = buildlog.trim_errors((DATA / "gcc_ninja_error.log").read_text(), rename=buildlog.INLINE_FILES)
    assert errors[0].startswith("cpp_sources line 5: error:")
    assert "factor" in errors[0] and "x.data_ptr<float>()[i] * factor" in errors[0]


def test_trim_linker_errors():
    errors = buildlog.trim_errors((DATA / "link_error.log").read_text())
    assert errors[:2] == ["linker: /usr/bin/ld: cannot find -lc10_cuda: No such file or directory",
                          "linker: /usr/bin/ld: cannot find -ltorch_cuda: No such file or directory"]
    assert not any("collect2" in e for e in errors)


def test_trim_triton_compilation_error_from_captured_traceback():
    errors = buildlog.trim_errors((DATA / "triton_compile_error.log").read_text())
    assert errors == ["triton kernel bad_kernel, line 6 from its def: NameError('zero is not defined')\n"
                      "    y = tl.maximum(x, zero)"]


try:
    import triton.language as tl
except ImportError:  # the Triton tests skip
    tl = None


def _broken_kernel(x_ptr, n, BLOCK):  # a Triton kernel body, wrapped in JITFunction below
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, undefined_name, mask=offs < n)  # noqa: F821


def test_trim_live_triton_compilation_error():
    """A real Triton front-end error (no GPU needed: the error comes before code generation).
    JITFunction is used directly because the tests run with TRITON_INTERPRET=1."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    source = ASTSource(JITFunction(_broken_kernel), signature={"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                       constexprs={"BLOCK": 128})
    with pytest.raises(Exception) as info:
        triton.compile(source, target=GPUTarget("cuda", 90, 32))
    errors = buildlog.trim_errors(f"{type(info.value).__module__}.{type(info.value).__name__}: {info.value}")
    assert len(errors) == 1
    assert errors[0].startswith("triton kernel _broken_kernel, line 3 from its def:"), errors
    assert "undefined_name" in errors[0]


def test_trim_python_exception_names_the_frame():
    # hand-written traceback in CPython's format
    log = textwrap.dedent("""\
        Traceback (most recent call last):
          File "/work/cand/relu__cuda.py", line 41, in forward
            return self.ext.relu(x.contiguous())
        AttributeError: module 'relu_ext_ab12' has no attribute 'relu'
        """)
    assert buildlog.trim_errors(log) == [
        "relu__cuda.py:41: AttributeError: module 'relu_ext_ab12' has no attribute 'relu'\n"
        "    return self.ext.relu(x.contiguous())"]


def test_trim_limit_dedup_and_fallback():
    log = "\n".join(f"/b/cuda.cu({n}): error: expected a \";\"" for n in range(1, 9)) + "\n/b/cuda.cu(1): error: expected a \";\""
    errors = buildlog.trim_errors(log, limit=3)
    assert [e.split(":")[0] for e in errors] == ["cuda.cu", "cuda.cu", "cuda.cu"]
    assert len(set(errors)) == 3
    assert buildlog.trim_errors("something odd\nhappened here\n") == ["something odd\nhappened here"]
    assert buildlog.trim_errors("") == []


# ---------------------------------------------------------------- hashing and arch


def test_build_hash_is_stable_and_sensitive():
    base = {"name": "ext", "cpp_sources": CPP_SRC, "cuda_sources": CUDA_SRC, "functions": ["f"],
            "extra_cuda_cflags": ["-O3"], "build_directory": "/a", "verbose": False}
    digest = buildcache.build_hash("load_inline", base, arch="9.0", tools=TOOLS)
    assert digest == buildcache.build_hash("load_inline", dict(base), arch="9.0", tools=dict(TOOLS))
    # where and how loudly it builds does not matter
    assert digest == buildcache.build_hash("load_inline", {**base, "build_directory": "/b", "verbose": True},
                                    arch="9.0", tools=TOOLS)
    changed = [
        buildcache.build_hash("load_inline", {**base, "cuda_sources": CUDA_SRC + " "}, arch="9.0", tools=TOOLS),
        buildcache.build_hash("load_inline", {**base, "extra_cuda_cflags": ["-O2"]}, arch="9.0", tools=TOOLS),
        buildcache.build_hash("load_inline", base, arch="8.0", tools=TOOLS),
        buildcache.build_hash("load_inline", base, arch="9.0", tools={**TOOLS, "nvcc": "release 12.8"}),
        buildcache.build_hash("load_inline", base, arch="9.0", tools={**TOOLS, "torch": "2.11"}),
    ]
    assert len({digest, *changed}) == 6


def test_build_hash_of_load_reads_source_files(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("int a;")
    args = {"name": "ext", "sources": [str(source)]}
    first = buildcache.build_hash("load", args, arch="none", tools=TOOLS)
    source.write_text("int b;")
    assert buildcache.build_hash("load", args, arch="none", tools=TOOLS) != first


def test_arch_list_and_precompile_env(tmp_path, monkeypatch):
    assert kwc.arch_list_for((9, 0)) == "9.0"
    assert kwc.arch_list_for([(9, 0), (8, 0), (9, 0)]) == "8.0;9.0"
    env = kwc.precompile_env(tmp_path, "9.0")
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0" and env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["TORCH_EXTENSIONS_DIR"].startswith(str(tmp_path))
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    assert kwc.current_arch_list() == "9.0"


# ---------------------------------------------------------------- the patch, with a fake builder


@pytest.fixture
def fake_torch_build(monkeypatch):
    """Replace torch's compile step and library import; count builds."""
    builds = []

    def fake_jit_compile(name, sources, *args, **kwargs):
        build_dir = Path(sources[0]).parent
        if "BROKEN" in Path(sources[-1]).read_text():
            print((DATA / "nvcc_ninja_error.log").read_text())
            raise RuntimeError(f"Error building extension '{name}'")
        print(f"[1/1] fake build of {name}")
        (build_dir / f"{name}.so").write_text("fake")
        builds.append(name)
        return types.SimpleNamespace(name=name)

    monkeypatch.setattr(cpp, "_jit_compile", fake_jit_compile)
    monkeypatch.setattr(cpp, "_import_module_from_library",
                        lambda name, path, is_python_module: types.SimpleNamespace(name=name, loaded=True))
    yield builds
    kwc.uninstall_build_cache()


def test_second_load_of_same_source_is_a_cache_hit(tmp_path, fake_torch_build):
    recorder = kwc.install_build_cache(tmp_path)
    first = cpp.load_inline("relu_ext", CPP_SRC, cuda_sources=CUDA_SRC, functions=["f"])
    assert first.name.startswith("relu_ext_") and len(first.name) == len("relu_ext_") + 16
    result = recorder.result()
    assert result.ok and not result.cached and result.backend == "cuda"
    assert "fake build of" in result.log  # build output was captured
    assert (tmp_path / "torch_extensions" / first.name / buildcache.BUILD_MARKER).exists()

    again = kwc.install_build_cache(tmp_path)  # a fresh recorder, as in a new worker process
    second = cpp.load_inline("relu_ext", CPP_SRC, cuda_sources=CUDA_SRC, functions=["f"])
    assert second.name == first.name and getattr(second, "loaded", False)
    assert again.result().cached and again.result().ok
    assert fake_torch_build == [first.name]  # built once

    cpp.load_inline("relu_ext", CPP_SRC, cuda_sources=CUDA_SRC + "\n// changed", functions=["f"])
    assert len(fake_torch_build) == 2 and not again.result().cached


def test_failed_build_is_recorded_and_raised(tmp_path, fake_torch_build):
    recorder = kwc.install_build_cache(tmp_path)
    with pytest.raises(RuntimeError):
        cpp.load_inline("bad_ext", CPP_SRC, cuda_sources=CUDA_SRC + "\n// BROKEN", functions=["f"])
    result = recorder.result()
    assert not result.ok
    assert result.errors[0].startswith('cuda_sources line 3: error: identifier "blockIdxx"')
    build_dir = Path(recorder.records[0].build_dir)
    assert not (build_dir / buildcache.BUILD_MARKER).exists()  # a failure is never cached
    assert "blockIdxx" in (build_dir / buildlog.LOG_FILE).read_text()


def test_no_builds_means_backend_none(tmp_path):
    recorder = kwc.BuildRecorder(cache_dir=str(tmp_path))
    assert recorder.result().ok and recorder.result().backend == "none"
    recorder.record_failure((DATA / "triton_compile_error.log").read_text())
    result = recorder.result()
    assert not result.ok and result.backend == "triton" and "zero" in result.errors[0]


def test_stale_torch_lock_is_cleared(tmp_path):
    (tmp_path / "lock").write_text("")
    with buildcache.locked(tmp_path):
        assert not (tmp_path / "lock").exists()


_CONCURRENT = """
import sys, time, types
from pathlib import Path
import torch.utils.cpp_extension as cpp
from kernelwright.judge import buildcache, buildlog
from kernelwright.judge import compile as kwc

def slow_build(name, sources, *args, **kwargs):
    with open(sys.argv[2], "a") as log:
        log.write(f"start {name}\\n")
    time.sleep(1.5)
    (Path(sources[0]).parent / f"{name}.so").write_text("fake")
    with open(sys.argv[2], "a") as log:
        log.write(f"end {name}\\n")
    return types.SimpleNamespace(name=name)

cpp._jit_compile = slow_build
cpp._import_module_from_library = lambda name, path, is_python_module: types.SimpleNamespace(name=name)
recorder = kwc.install_build_cache(sys.argv[1])
cpp.load_inline("same_ext", "torch::Tensor f(torch::Tensor x);", functions=["f"])
print("CACHED" if recorder.result().cached else "BUILT")
"""


def test_two_processes_building_the_same_hash_build_once(tmp_path):
    script = tmp_path / "build.py"
    script.write_text(_CONCURRENT)
    events = tmp_path / "events.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp_path / "cache"), str(events)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert sorted(out.strip().splitlines()[-1] for out, _ in outputs) == ["BUILT", "CACHED"]
    assert [line.split()[0] for line in events.read_text().splitlines()] == ["start", "end"]


# ---------------------------------------------------------------- why a build was missed
# (a real g++ build across two processes: tests/judge/test_pool.py, through the pool's two phases)


def _marker(folder: Path, payload: dict) -> None:
    folder.mkdir(parents=True)
    (folder / buildcache.BUILD_MARKER).write_text(json.dumps({
        "hash": buildcache.content_digest(payload), "sources": buildcache.content_digest(payload["arguments"]), "arch": payload["arch"],
        "toolchain": payload["toolchain"]}))


def test_a_miss_explained_by_another_arch_or_toolchain_says_so(tmp_path):
    args = {"name": "ext", "cpp_sources": CPP_SRC, "cuda_sources": CUDA_SRC, "functions": ["f"]}
    built = buildcache.build_payload("load_inline", args, arch="9.0", tools=TOOLS)
    _marker(tmp_path / buildcache.hashed_name("ext", buildcache.content_digest(built)), built)
    wanted = buildcache.build_payload("load_inline", args, arch="9.0a", tools=TOOLS)
    here = tmp_path / buildcache.hashed_name("ext", buildcache.content_digest(wanted))
    assert "built for arch '9.0'" in buildcache.explain_miss(here, wanted)
    assert "builds for '9.0a'" in buildcache.explain_miss(here, wanted)
    newer = buildcache.build_payload("load_inline", args, arch="9.0", tools={**TOOLS, "nvcc": "release 13.1"})
    there = tmp_path / buildcache.hashed_name("ext", buildcache.content_digest(newer))
    assert "another toolchain (nvcc)" in buildcache.explain_miss(there, newer)
    other_sources = buildcache.build_payload("load_inline", {**args, "cpp_sources": CPP_SRC + " "}, arch="9.0a",
                                      tools=TOOLS)
    assert buildcache.explain_miss(tmp_path / buildcache.hashed_name("ext", buildcache.content_digest(other_sources)), other_sources) == ""


def test_unset_arch_list_is_pinned_to_what_torch_detects(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    detected = kwc.pin_arch_list()
    assert detected == kwc.current_arch_list()  # the hashed arch is what the build uses
    if detected == "none":  # no GPU here: nothing to pin
        assert "TORCH_CUDA_ARCH_LIST" not in os.environ
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0;9.0")
    assert kwc.pin_arch_list() == "8.0;9.0" and kwc.resolve_arch_list() == "8.0;9.0"
    assert kwc.resolve_arch_list("9.0a") == "9.0a"  # the run's own setting wins
