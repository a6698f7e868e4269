"""Code and JSON extraction from model answers (all answers here are hand-written test data)."""
from __future__ import annotations

import pytest

from kernelwright.llm.parse import extract_code, extract_json, find_fences

MODEL_NEW = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def test_single_python_block():
    result = extract_code(f"Here you go:\n```python\n{MODEL_NEW}```\nDone.")
    assert result.ok and result.value == MODEL_NEW.rstrip("\n")


@pytest.mark.parametrize("tag", ["py", "python", "python3", "Python", ""])
def test_python_tags_and_untagged(tag):
    result = extract_code(f"```{tag}\n{MODEL_NEW}```")
    assert result.ok and "class ModelNew" in result.value


def test_block_defining_model_new_wins_over_longer_helper():
    helper = "def helper():\n" + "    x = 1\n" * 30
    answer = f"First a sketch:\n```python\n{helper}```\nFinal:\n```python\n{MODEL_NEW}```"
    assert extract_code(answer).value == MODEL_NEW.rstrip("\n")


def test_last_model_new_block_wins():
    v2 = MODEL_NEW.replace("return x", "return x * 1")
    answer = f"```python\n{MODEL_NEW}```\nImproved:\n```python\n{v2}```"
    assert "x * 1" in extract_code(answer).value


def test_without_model_new_the_longest_block_wins():
    answer = "```python\nx = 1\n```\n```python\nimport os\ny = os.sep\nz = 2\n```"
    assert extract_code(answer).value.startswith("import os")


def test_cuda_block_for_cuda_and_not_for_python():
    kernel = "__global__ void k(float* x) { x[0] = 1; }"
    answer = f"```cuda\n{kernel}\n```"
    assert extract_code(answer, lang="cuda").value == kernel
    result = extract_code(answer, lang="python")
    assert not result.ok and "tagged cuda" in result.error


def test_python_chosen_among_mixed_languages():
    answer = f"```cpp\nint main() {{}}\n```\n```python\n{MODEL_NEW}```"
    assert extract_code(answer).value == MODEL_NEW.rstrip("\n")


def test_unterminated_fence_with_complete_code_is_accepted():
    assert extract_code(f"```python\n{MODEL_NEW}").ok


def test_cut_off_code_is_a_failure_that_says_so_and_keeps_the_code():
    result = extract_code("```python\nclass ModelNew(torch.nn.Module):\n    def forward(self, x")
    assert not result.ok
    assert "syntax error at line 2" in result.error and "cut off" in result.error
    assert result.value.startswith("class ModelNew")


def test_closed_block_preferred_to_a_cut_off_one():
    answer = f"```python\n{MODEL_NEW}```\nA variant:\n```python\nclass ModelNew(torch.nn.Module):\n    def f("
    result = extract_code(answer)
    assert result.ok and result.value == MODEL_NEW.rstrip("\n")


def test_whole_answer_is_code():
    assert extract_code(MODEL_NEW).value == MODEL_NEW.rstrip("\n")


def test_code_after_a_line_of_prose_without_fences():
    result = extract_code("Sure, here is the module.\n" + MODEL_NEW)
    assert result.ok and result.value.startswith("import torch")


def test_longer_fences_and_tildes():
    inner = "```\nnot a fence end\n```"
    answer = f"````python\ns = '''\n{inner}\n'''\n````"
    assert "not a fence end" in extract_code(answer).value
    assert extract_code(f"~~~python\n{MODEL_NEW}~~~").ok


@pytest.mark.parametrize("garbage", ["", "   ", "I cannot help with that.", "\x00\x01\x02",
                                     "```python\n```", "Sure!\n\n- step one\n- step two"])
def test_garbage_is_a_parse_failure_never_an_exception(garbage):
    result = extract_code(garbage)
    assert not result.ok and result.error


def test_non_string_input_does_not_raise():
    assert not extract_code(None).ok  # type: ignore[arg-type]
    assert not extract_json(12).ok  # type: ignore[arg-type]


def test_find_fences_reports_tag_line_and_closure():
    fences = find_fences("intro\n```python title=x\na\n```\n```\nb")
    assert [(f.tag, f.body, f.closed, f.line) for f in fences] == \
           [("python", "a", True, 2), ("", "b", False, 5)]


# ---- JSON ----

def test_plain_json():
    assert extract_json('{"plan": ["tile", "fuse"], "k": 2}').value == {"plan": ["tile", "fuse"], "k": 2}


def test_fenced_json_among_prose():
    answer = 'Thinking [1]...\n```json\n{"choice": 3}\n```\nThat is all.'
    assert extract_json(answer).value == {"choice": 3}


def test_json_embedded_in_prose_prefers_the_object():
    assert extract_json('See [1]. My answer: {"a": 1} - hope it helps').value == {"a": 1}


def test_trailing_commas_are_forgiven():
    assert extract_json('```json\n{"a": [1, 2,],}\n```').value == {"a": [1, 2]}


@pytest.mark.parametrize("bad", ["", "no json here", '{"a": ', "```json\n{oops}\n```"])
def test_bad_json_is_a_failure_with_a_position(bad):
    result = extract_json(bad)
    assert not result.ok and result.error
