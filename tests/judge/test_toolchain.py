"""toolchain.py: tool versions asked once per binary and kept on disk (workers are fresh processes);
toolchain and arch detection apart from the build cache and the environment record (no import cycle)."""
from __future__ import annotations

import ast
import os
import time
from pathlib import Path

from kernelwright.judge import toolchain as env


def _fake_tool(folder, counter):
    tool = folder / "fake-nvcc"
    tool.write_text(f"#!/bin/sh\necho run >> {counter}\necho 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    tool.chmod(0o755)
    return tool


def test_tool_output_is_asked_once_then_read_from_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("KW_CACHE_DIR", str(tmp_path / "cache"))
    counter = tmp_path / "runs.txt"
    tool = _fake_tool(tmp_path, counter)
    first = env.tool_output(str(tool), "--version")
    assert "V13.0.88" in first
    assert env.tool_output(str(tool), "--version") == first  # as another process would: from tools.json
    assert counter.read_text().count("run") == 1
    assert (tmp_path / "cache" / env.TOOLS_FILE).is_file()


def test_a_changed_binary_is_asked_again(tmp_path, monkeypatch):
    monkeypatch.setenv("KW_CACHE_DIR", str(tmp_path / "cache"))
    counter = tmp_path / "runs.txt"
    tool = _fake_tool(tmp_path, counter)
    env.tool_output(str(tool), "--version")
    later = time.time() + 5
    os.utime(tool, (later, later))  # a reinstalled toolchain: same path, new modification time
    env.tool_output(str(tool), "--version")
    assert counter.read_text().count("run") == 2


def test_missing_tools_give_empty_output(tmp_path, monkeypatch):
    monkeypatch.setenv("KW_CACHE_DIR", str(tmp_path / "cache"))
    assert env.tool_output(str(tmp_path / "no-such-tool"), "--version") == ""
    assert env.tool_output(None, "--version") == ""


JUDGE = Path(env.__file__).parent


def _judge_imports(module: str) -> set[str]:
    """The judge modules `module` imports (at the top or inside functions)."""
    tree = ast.parse((JUDGE / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
    return found


def test_toolchain_detection_has_one_home_and_no_cycle():
    """compile (the build cache) and env (the environment record) both read the toolchain; neither
    imports the other, and the toolchain imports only where the caches are."""
    assert _judge_imports("toolchain") <= {"cachedir"}
    assert _judge_imports("cachedir") == set()
    assert "env" not in _judge_imports("compile")
    assert "compile" not in _judge_imports("env")
    assert {"toolchain"} <= _judge_imports("compile") and {"toolchain"} <= _judge_imports("env")
