"""judge/own_code.py: the candidate's launches are counted and the ops they dispatch attributed."""
from __future__ import annotations

import types

import pytest
import torch

from kernelwright.judge.own_code import EXTENSION, KERNEL, OwnCode
from kernelwright.problem.ops import PYTHON, OpRecorder

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.fixture
def own():
    tracker = OwnCode().install()
    yield tracker
    tracker.uninstall()


def _fake_extension() -> types.ModuleType:
    """A stand-in for a module load_inline returns: a 'C++' function that calls ATen."""
    module = types.ModuleType("fake_ext")
    module.matmul_t = lambda x, w: torch.matmul(x, w.t())
    module.__file__ = "/nonexistent/fake_ext.so"
    return module


def test_extension_calls_are_counted_and_their_aten_ops_attributed(own):
    ext = own.wrap_module(_fake_extension())
    x, w = torch.randn(4, 8), torch.randn(3, 8)
    recorder = OpRecorder(origin=own.origin)
    with recorder, torch.no_grad():
        y = ext.matmul_t(x, w)
        torch.relu(y)
    assert own.extension == {"fake_ext.matmul_t": 1} and own.launched()
    assert "relu" in recorder.buckets[PYTHON] and "mm" not in recorder.buckets[PYTHON]
    assert "mm" in recorder.buckets[EXTENSION]
    assert own.libraries == ["/nonexistent/fake_ext.so"]


def test_triton_launches_are_counted_and_their_ops_are_not_torch_work(own):
    x = torch.arange(10, dtype=torch.float32)
    y = torch.empty_like(x)
    recorder = OpRecorder(origin=own.origin)
    with recorder:
        _double[(1,)](x, y, 10, BLOCK=16)
    assert own.triton == {"_double": 1} and torch.equal(y, 2 * x)
    assert set(recorder.buckets) <= {PYTHON, KERNEL} and not any(
        n in recorder.buckets[PYTHON] for n in ("mul", "add"))
    own.reset()
    assert not own.launched()


def test_python_custom_ops_count_as_torch_work(own):
    @torch.library.custom_op("kwtest_own_code::hidden_mm", mutates_args=())
    def hidden_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b

    a = torch.randn(3, 3)
    recorder = OpRecorder(origin=own.origin)
    with recorder:
        hidden_mm(a, a)
    assert recorder.buckets[PYTHON] == {"kwtest_own_code::hidden_mm": 1}  # the matmul inside is hidden
    assert not own.custom_ops and not own.launched()


def test_uninstall_puts_the_originals_back():
    import torch.utils.cpp_extension as cpp
    from triton.runtime.jit import JITFunction

    before = (cpp.load_inline, cpp.load, vars(JITFunction)["run"])
    tracker = OwnCode().install()
    assert cpp.load_inline is not before[0] and vars(JITFunction)["run"] is not before[2]
    tracker.uninstall()
    assert (cpp.load_inline, cpp.load, vars(JITFunction)["run"]) == before
