"""Problem and candidate loading: overrides re-run the module, broken files get clear errors."""
from __future__ import annotations

import textwrap

import pytest
import torch

from kernelwright.problem import ProblemError, check_signatures, load_candidate, load_problem, parse_override

PROBLEM = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, out_channels, bias_shape):
            super().__init__()
            self.bias = nn.Parameter(torch.randn(bias_shape))
            self.out_channels = out_channels

        def forward(self, x):
            return x + self.bias

    batch_size = 128
    out_channels = 16
    height = width = 64
    height, width = 32, 32
    bias_shape = (out_channels, 1, 1)

    def get_inputs():
        return [torch.rand(batch_size, out_channels, height, width)]

    def get_init_inputs():
        return [out_channels, bias_shape]
    """
)


@pytest.fixture
def problem_file(tmp_path):
    path = tmp_path / "toy.py"
    path.write_text(PROBLEM)
    return path


def test_override_is_followed_by_derived_constants(problem_file):
    problem = load_problem(problem_file, {"out_channels": 4})
    assert problem.module.bias_shape == (4, 1, 1)
    assert problem.make_model(0).bias.shape == (4, 1, 1)


def test_override_survives_later_reassignment(problem_file):
    problem = load_problem(problem_file, {"height": 8})
    assert problem.module.height == 8
    assert problem.make_inputs(0)[0].shape == (128, 16, 8, 32)


def test_unknown_override_names_the_constants(problem_file):
    with pytest.raises(ProblemError, match="no module-level assignment.*batch_size"):
        load_problem(problem_file, {"nope": 3})


def test_same_seed_gives_same_weights_and_inputs(problem_file):
    problem = load_problem(problem_file)
    assert torch.equal(problem.make_model(3).bias, problem.make_model(3).bias)
    assert not torch.equal(problem.make_model(3).bias, problem.make_model(4).bias)
    assert torch.equal(problem.make_inputs(5)[0], problem.make_inputs(5)[0])


def test_parse_override_literals():
    assert parse_override("batch_size=16") == ("batch_size", 16)
    assert parse_override("shape=(1, 2)") == ("shape", (1, 2))
    assert parse_override("mode = fast") == ("mode", "fast")
    with pytest.raises(ProblemError):
        parse_override("batch_size")


@pytest.mark.parametrize(
    "source, pattern, line",
    [
        ("class ModelNew:\n    def forward(self, x)\n        return x\n", "syntax error", 2),
        ("import torch\nclass Other:\n    pass\n", "must define class ModelNew", None),
        ("import torch\nx = 1\nimport not_a_module_anywhere\n", "ModuleNotFoundError", 3),
        ("ModelNew = 3\n", "must be a class", None),
    ],
)
def test_broken_candidates_get_one_paragraph_errors(tmp_path, source, pattern, line):
    path = tmp_path / "cand.py"
    path.write_text(source)
    with pytest.raises(ProblemError, match=pattern) as info:
        load_candidate(path)
    assert str(path) in str(info.value)
    assert info.value.line == line
    assert "\n" not in str(info.value)


def test_missing_problem_names(tmp_path):
    path = tmp_path / "p.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(ProblemError, match="missing: get_inputs, get_init_inputs"):
        load_problem(path)


@pytest.mark.parametrize("text", ['{"not": "python code"}\n', "", "import os\nprint('a script')\n"])
def test_a_file_that_is_no_problem_at_all_is_called_so(tmp_path, text):
    path = tmp_path / "notes.py"
    path.write_text(text)
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a KernelBench problem file: it defines none of Model, get_inputs, "
                              "get_init_inputs") and "missing:" not in message


@pytest.mark.parametrize("function, line", [("get_inputs", 10), ("get_init_inputs", 14)])
def test_a_raising_problem_function_is_named_with_its_line_when_shrinking(tmp_path, function, line):
    source = PROBLEM_TEMPLATE.replace(f"def {function}():\n    return", f"def {function}():\n    raise ValueError('no data here')\n    return")
    path = tmp_path / "p.py"
    path.write_text(source)
    with pytest.raises(ProblemError) as info:
        load_problem(path, shrink=True)
    assert str(info.value).startswith(f"{path}, line {line}: {function}() failed with ValueError: no data here")
    assert "cannot measure" not in str(info.value)


PROBLEM_TEMPLATE = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.rand(8)]


def get_init_inputs():
    return []
"""


def test_signature_mismatch_is_reported(problem_file, tmp_path):
    problem = load_problem(problem_file)
    cand = tmp_path / "cand.py"
    cand.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n"
        "    def __init__(self, out_channels):\n        super().__init__()\n"
        "    def forward(self, x):\n        return x\n"
    )
    module = load_candidate(cand)
    with pytest.raises(ProblemError, match="must accept the 2 arguments") as info:
        check_signatures(problem, module.ModelNew, cand)
    assert info.value.line == 3
