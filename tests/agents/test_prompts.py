"""The prompt files themselves: they compile, stay general, and the worked examples really work."""
from __future__ import annotations

import importlib.util
import re

import pytest
import torch

from kernelwright.agents import Analyst, Coder, Planner, Repairer
from kernelwright.agents.code_check import check_candidate
from kernelwright.agents.templates import BUILTIN_PROMPTS, load_template, make_environment

PROMPT_FILES = sorted(p for p in BUILTIN_PROMPTS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _is_torch_operator(name: str) -> bool:
    """ReLU, Softmax, cumsum, BatchNorm(1d), GRU...: operator names any kernel prompt may use."""
    lowered = name.lower()
    return (any(attr.lower().startswith(lowered) for attr in dir(torch.nn))
            or hasattr(torch, lowered) or hasattr(torch.nn.functional, lowered))


def kernelbench_names(kernelbench) -> set[str]:
    """Problem names a prompt must not contain: file stems ("19_ReLU"), descriptive names of two or
    more words ("Matmul_with_transposed_B", also spelled with spaces) and single-word names that
    are not PyTorch operators ("VGG16", "SwinMLP"; but not "ReLU")."""
    names = set()
    for path in kernelbench.glob("level*/*.py"):
        names.add(path.stem.lower())
        descriptive = re.sub(r"^\d+_", "", path.stem).strip("_")
        if "_" in descriptive:
            names.update({descriptive.lower(), descriptive.replace("_", " ").lower()})
        elif not _is_torch_operator(descriptive):
            names.add(descriptive.lower())
    return names


def test_no_prompt_file_names_a_kernelbench_problem(kernelbench):
    names = kernelbench_names(kernelbench)
    assert len(names) > 100 and "vgg16" in names and "relu" not in names  # the shared copy was really read
    assert _named(names, "tune it like the vgg16 model") == ["vgg16"]  # the scan does catch names
    for path in PROMPT_FILES:
        found = _named(names, path.read_text().lower())
        assert not found, f"{path.relative_to(BUILTIN_PROMPTS)} names KernelBench problems: {found}"


def _named(names: set[str], text: str) -> list[str]:
    return sorted(n for n in names if re.search(rf"(?<![a-z0-9]){re.escape(n)}(?![a-z0-9])", text))


def test_every_template_compiles():
    env = make_environment()
    templates = [p.relative_to(BUILTIN_PROMPTS).as_posix() for p in PROMPT_FILES if p.suffix == ".j2"]
    assert len(templates) >= 15
    for name in templates:
        load_template(env, name)


def test_each_agent_has_role_layout_and_answer_format_files():
    for agent_cls in (Planner, Coder, Repairer, Analyst):
        for name in (f"roles/{agent_cls.name}.md.j2", agent_cls.template, f"format_{agent_cls.name}.md.j2"):
            assert (BUILTIN_PROMPTS / name).is_file(), name


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_worked_examples_pass_the_answer_check(backend):
    source = (BUILTIN_PROMPTS / "examples" / f"{backend}_elementwise.py").read_text()
    result = check_candidate(source, backend)
    assert result.ok and result.warnings == [], (result.errors, result.warnings)
    assert "--use_fast_math" not in source and "-arch" not in source.replace("No -arch flag", "")


def _load(path):
    spec = importlib.util.spec_from_file_location(f"kw_example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_triton_worked_example_computes_what_the_prompt_says(dtype):
    """Runs on the CPU interpreter here (tests/conftest.py sets TRITON_INTERPRET=1), on a GPU there."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = _load(BUILTIN_PROMPTS / "examples" / "triton_elementwise.py")
    torch.manual_seed(0)
    x = torch.randn(3, 1500, dtype=dtype, device=device)  # not a multiple of the block: tail masking
    y = torch.randn(3, 1500, dtype=dtype, device=device)
    x_before, y_before = x.clone(), y.clone()
    out = module.ModelNew(0.75)(x, y)
    torch.testing.assert_close(out, (x.double() + 0.75 * y.double()).to(dtype))
    assert out.dtype == dtype and torch.equal(x, x_before) and torch.equal(y, y_before)


@pytest.mark.gpu
def test_cuda_worked_example_compiles_and_computes_what_the_prompt_says():
    module = _load(BUILTIN_PROMPTS / "examples" / "cuda_elementwise.py")
    model = module.ModelNew(0.75)
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        x = torch.randn(3, 100_003, device="cuda", dtype=dtype)
        y = torch.randn(3, 100_003, device="cuda", dtype=dtype)
        out = model(x, y)
        torch.testing.assert_close(out, (x.double() + 0.75 * y.double()).to(dtype))
    strided = torch.randn(64, 64, device="cuda").t()  # non-contiguous input
    torch.testing.assert_close(model(strided, strided), strided * 1.75)
