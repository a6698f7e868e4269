"""Reading a candidate's source: backend and forbidden constructs."""
from __future__ import annotations

from kernelwright.judge.candidate_kinds import backend_of, missing_names, scan


def codes(source: str) -> list[tuple[str, str, int]]:
    return [(f.code, f.what, f.line) for f in scan(source)]


def test_backend_of_source():
    assert backend_of("from torch.utils.cpp_extension import load_inline") == "cuda"
    assert backend_of("import triton\n@triton.jit\ndef k(): pass") == "triton"
    assert backend_of("import torch") == "torch"


def test_torch_compile_found_through_aliases():
    assert codes("import torch\nf = torch.compile(g)") == [("torch_op", "torch.compile", 2)]
    assert codes("from torch import compile as c\nf = c(g)")[0][:2] == ("torch_op", "torch.compile")
    assert codes("import torch._dynamo as d\nd.reset()")[0][:2] == ("torch_op", "torch._dynamo")
    assert codes("import torch\ntorch._inductor.config.x = 1")[0][:2] == ("torch_op", "torch._inductor")


def test_introspection_found():
    assert codes("import gc\nobjs = gc.get_objects()") == [("introspection", "gc.get_objects", 2)]
    assert codes("import sys\nf = sys._getframe(1)")[0][:2] == ("introspection", "sys._getframe")
    assert codes("def f(fr):\n    return fr.f_back.f_locals")[0][0] == "introspection"


def test_comments_strings_and_syntax_errors_are_ignored():
    assert codes("# torch.compile(model)\nx = 'gc.get_objects()'") == []
    assert codes("def broken(:\n    torch.compile") == []


PROBLEM_NAMES = ("Model", "get_inputs", "get_init_inputs")


def test_missing_names_reports_syntax_errors_with_the_line():
    assert missing_names("c.py", "import torch\n\ndef f(:\n", ("ModelNew",), "the candidate") == \
        "c.py, line 3: syntax error: invalid syntax"


def test_missing_names_finds_bindings_of_every_kind():
    assert missing_names("c.py", "class Other: pass", ("ModelNew",), "x") == "c.py: the candidate must define class ModelNew"
    assert missing_names("c.py", "from m import Impl as ModelNew", ("ModelNew",), "x") is None
    assert missing_names("c.py", "try:\n    ModelNew = 1\nexcept ImportError:\n    pass", ("ModelNew",), "x") is None
    assert missing_names("c.py", "from m import *", ("ModelNew",), "x") is None  # cannot tell without running
    message = missing_names("p.py", "class Model: pass\ndef get_inputs(): pass", PROBLEM_NAMES, "a problem file")
    assert message == "p.py: a problem file must define Model, get_inputs, get_init_inputs; missing: get_init_inputs"


def test_missing_names_accepts_every_kernelbench_problem(kernelbench):
    for path in sorted(kernelbench.rglob("*.py")):
        assert missing_names(str(path), path.read_text(), PROBLEM_NAMES, "a problem file") is None, path
