"""The check registry (judge/checks.py) is the one home of a check's flag code: every flag a check
raises is made by `check_flag`, which takes the code from the registry and names the check on it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernelwright.judge import checks
from kernelwright.judge.checks import CHECKS, Check, check_flag
from kernelwright.judge.verdict import REJECT, WARN

PACKAGE = Path(__file__).resolve().parents[2] / "kernelwright"


def flag_calls(root: Path = PACKAGE) -> list[str]:
    """`path:line code` of every `Flag(...)` that spells a check's flag code or names a check itself."""
    codes = {c.flag for c in CHECKS.values() if c.flag}
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "checks.py" and path.parent.name == "judge":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Flag"):
                continue
            code = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            if code in codes or any(k.arg == "check" for k in node.keywords):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno} {code or ast.unparse(node.args[0])}")
    return found


def test_every_check_flag_is_made_from_the_registry():
    found = flag_calls()
    assert not found, "flags of registered checks made by hand (use checks.check_flag):\n" + "\n".join(found)


def test_the_scan_sees_a_flag_made_by_hand(tmp_path):
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "x.py").write_text('Flag("monkeypatch", "reject", "m")\nFlag("note", "info", "n", check="c")\n'
                                             'Flag("judge_note", "info", "fine")\n')
    assert flag_calls(tmp_path) == [f"{tmp_path.name}/judge/x.py:1 monkeypatch", f"{tmp_path.name}/judge/x.py:2 note"]


def test_check_flag_takes_the_code_from_the_registry(monkeypatch):
    flag = check_flag("identity_snapshot", REJECT, "patched")
    assert (flag.code, flag.severity, flag.check) == ("monkeypatch", REJECT, "identity_snapshot")
    with pytest.raises(KeyError):
        check_flag("no_such_check", REJECT, "m")
    with pytest.raises(ValueError, match="raises no flag"):
        check_flag("signatures", REJECT, "m")
    monkeypatch.setitem(CHECKS, "fresh_check", Check("fresh_check", "fresh_flag", "kernelwright.judge.checks:check_flag",
                                                     "a check added by the test"))
    assert check_flag("fresh_check", WARN, "m").code == "fresh_flag" and checks.flag_code("fresh_check") == "fresh_flag"
