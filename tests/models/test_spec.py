"""spec.py: a MODEL_SPEC names a callable in a file or a module; its contract is checked."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelwright.models.spec import ModelSpecError, absolute_spec, build_model, load_callable

TINY = Path(__file__).with_name("tiny_model.py")


def test_a_file_spec_builds_the_model_and_its_inputs():
    built = build_model(f"{TINY}:build")
    assert type(built.model).__name__ == "TinyModel"
    assert len(built.args) == 1 and built.args[0].dtype == torch.int64 and built.kwargs == {}


def test_inputs_from_a_second_callable_as_keywords():
    built = build_model(f"{TINY}:build_model_only", f"{TINY}:inputs")
    assert built.args == () and list(built.kwargs) == ["tokens"]
    assert built.model(**built.kwargs).shape == (2, 8, 50)


def test_a_module_spec_is_imported_from_the_search_path(tmp_path):
    (tmp_path / "usermodels").mkdir()
    (tmp_path / "usermodels" / "__init__.py").write_text("")
    (tmp_path / "usermodels" / "mlp.py").write_text(
        "import torch\n\ndef build():\n    return torch.nn.Linear(4, 2), (torch.randn(3, 4),)\n")
    fn = load_callable("usermodels.mlp:build", [str(tmp_path)])
    assert isinstance(fn()[0], torch.nn.Linear)


@pytest.mark.parametrize("spec, message", [
    ("no_colon", "must look like"),
    ("missing_file.py:build", "no file"),
    (f"{TINY}:nothing_here", "no callable named 'nothing_here'"),
    (f"{TINY}:build_model_only", "must return (model, example_inputs)"),
    (f"{TINY}:inputs", "must return (model, example_inputs)"),
])
def test_bad_specs_say_why(spec, message):
    with pytest.raises(ModelSpecError, match=None) as info:
        build_model(spec)
    assert message in str(info.value)


def test_a_failing_build_is_named_with_its_error(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("def build():\n    raise RuntimeError('no weights here')\n")
    with pytest.raises(ModelSpecError) as info:
        build_model(f"{path}:build")
    assert "calling the model callable" in str(info.value) and "no weights here" in str(info.value)


def test_file_specs_are_made_absolute():
    assert absolute_spec("tests/models/tiny_model.py:build").startswith("/")
    assert absolute_spec("pkg.mod:build") == "pkg.mod:build"
