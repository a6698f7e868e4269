"""One source of truth: the rules the model reads, the judge's checks and docs/judge.md agree."""
from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.judge.checks import CHECKS
from kernelwright.judge.config import JudgeConfig
from kernelwright.rules import NAMES, RULE_SETS, UnknownRuleSet, all_rules, get, header_line, prompt_markdown
from kernelwright.rules.render import DOCS_BEGIN, DOCS_END, docs_markdown, replace_docs_section

REPO = Path(__file__).resolve().parents[2]


def test_every_stated_rule_is_enforced_by_registered_checks():
    for rule in all_rules():
        assert rule.checks, f"rule {rule.id} names no judge check"
        unknown = set(rule.checks) - set(CHECKS)
        assert not unknown, f"rule {rule.id} names checks the judge does not register: {sorted(unknown)}"


def test_every_judge_check_serves_a_stated_rule():
    stated = {check for rule in all_rules() for check in rule.checks}
    assert set(CHECKS) <= stated, f"checks no rule states: {sorted(set(CHECKS) - stated)}"


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_every_check_names_a_function_that_exists(check_id):
    module_name, _, attribute = CHECKS[check_id].implemented_by.partition(":")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, attribute)), CHECKS[check_id].implemented_by


def test_the_rule_sets_differ_only_in_whose_code_does_the_work():
    common = set.intersection(*(s.check_ids() for s in RULE_SETS.values()))
    assert {"own_kernel_launch", "precision_switches", "output_refill", "identity_snapshot", "side_stream",
            "compare_rel_l2"} <= common
    assert "torch_work" in get("kernelbench").check_ids() and "python_torch_ops" not in get("kernelbench").check_ids()
    assert {"torch_work", "python_torch_ops"} <= get("library").check_ids()
    assert {"python_torch_ops", "extension_torch_ops", "extension_libraries"} <= get("strict").check_ids()
    assert "extension_libraries" not in get("library").check_ids()


def test_docs_section_is_rendered_from_the_rules():
    text = (REPO / "docs" / "judge.md").read_text()
    assert DOCS_BEGIN in text and DOCS_END in text
    assert replace_docs_section(text) == text, "docs/judge.md is stale: python -m kernelwright.rules --docs docs/judge.md"
    for rule in all_rules():
        assert f"`{rule.id}`" in docs_markdown()


@pytest.mark.parametrize("name", NAMES)
def test_prompt_states_exactly_the_rules_of_the_set(name):
    text = prompt_markdown(name, tolerances="float32: atol = rtol = 1e-4")
    for rule in get(name).rules:
        assert rule.text.replace("{tolerances}", " (float32: atol = rtol = 1e-4)") in text
    others = [r for r in all_rules() if r not in get(name).rules]
    for rule in others:
        assert rule.text.replace("{tolerances}", "") not in text
    assert f"`{name}`" in text and name in header_line(name)


def test_names_default_and_errors():
    assert get(None).name == "kernelbench" and get(" Strict ").name == "strict"
    with pytest.raises(UnknownRuleSet, match="kernelbench, library, strict"):
        get("lenient")
    with pytest.raises(ValueError):
        JudgeConfig(rules="lenient")


def test_stored_torch_op_policy_reads_as_a_rule_set():
    assert JudgeConfig.from_dict({"torch_op_policy": "reject"}).rules == "strict"
    assert JudgeConfig.from_dict({"torch_op_policy": "allow"}).rules == "kernelbench"
    assert JudgeConfig.from_dict({"torch_op_policy": "reject", "rules": "library"}).rules == "library"
    assert "torch_op_policy" not in JudgeConfig().to_dict() and JudgeConfig().rules == "kernelbench"


def test_rules_package_imports_only_the_standard_library():
    code = ("import sys, kernelwright.rules; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy', 'triton', 'jinja2', 'rich')); "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_cli_prints_a_rule_set():
    result = subprocess.run([sys.executable, "-m", "kernelwright.rules", "strict"], capture_output=True, text=True,
                            cwd=REPO)
    assert result.returncode == 0 and "Rule set: `strict`" in result.stdout
