"""env.py: tool versions asked once per binary and kept on disk (workers are fresh processes)."""
from __future__ import annotations

import os
import time

from kernelwright.judge import env


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
