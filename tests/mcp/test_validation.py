"""What the server accepts, in-process: workspace confinement (symlinks followed), size bounds, LLM
specs, size overrides, trimming of verdicts and profiles for a model."""
from __future__ import annotations

import dataclasses
import math

import pytest

from kernelwright.mcp import runs, summaries, validation
from kernelwright.mcp.validation import Limits, ToolInputError
from kernelwright.mcp.workspace import Workspace


def refusal(call, *args, **kwargs) -> tuple[str, str | None]:
    with pytest.raises(ToolInputError) as caught:
        call(*args, **kwargs)
    return caught.value.code, caught.value.field


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    shelf = tmp_path / "shelf"  # read-only extra folder
    root.mkdir()
    shelf.mkdir()
    (root / "p.py").write_text("x = 1\n")
    (shelf / "q.py").write_text("y = 2\n")
    (tmp_path / "secret.py").write_text("z = 3\n")
    return Workspace.open(root, [shelf], Limits(problem_bytes=100))


def test_paths_inside_the_workspace_or_a_read_folder_only(ws, tmp_path):
    assert ws.problem_file("p.py") == ws.root / "p.py"
    assert ws.problem_file(str(tmp_path / "shelf" / "q.py")).name == "q.py"
    for bad in ("../secret.py", str(tmp_path / "secret.py"), "/etc/passwd", "sub/../../secret.py"):
        assert refusal(ws.problem_file, bad) == ("bad_path", "problem")
    assert refusal(ws.resolve, str(tmp_path / "shelf" / "q.py"), "out", write=True) == ("bad_path", "out")


def test_symbolic_links_are_followed_before_the_check(ws, tmp_path):
    (ws.root / "escape.py").symlink_to(tmp_path / "secret.py")
    (ws.root / "alias.py").symlink_to(ws.root / "p.py")
    (ws.root / "dir").symlink_to(tmp_path)
    assert refusal(ws.problem_file, "escape.py")[0] == "bad_path"
    assert refusal(ws.problem_file, "dir/secret.py")[0] == "bad_path"
    assert ws.problem_file("alias.py") == ws.root / "p.py"


def test_problem_files_are_python_files_of_bounded_size(ws):
    (ws.root / "notes.txt").write_text("hi")
    (ws.root / "big.py").write_text("#" * 101)
    assert refusal(ws.problem_file, "notes.txt")[0] == "bad_path"
    assert refusal(ws.problem_file, "missing.py")[0] == "bad_path"
    assert refusal(ws.problem_file, "big.py")[0] == "too_large"
    assert refusal(ws.problem_file, "p.py\x00.txt")[0] == "bad_value"


def test_runs_are_named_or_located_inside_the_workspace(ws):
    (ws.runs_dir / "r1").mkdir(parents=True)
    (ws.runs_dir / "r1" / "run.sqlite").write_text("")
    assert ws.run_dir("r1") == ws.runs_dir / "r1"
    assert ws.run_dir("kw-runs/r1") == ws.runs_dir / "r1"
    assert refusal(ws.run_dir, "r2") == ("not_found", "run")
    assert refusal(ws.run_dir, "..")[0] == "bad_value"
    assert refusal(ws.run_dir, "../../etc")[0] == "bad_path"
    assert ws.new_run_dir("r2") == ws.runs_dir / "r2"
    assert refusal(ws.new_run_dir, "r1")[0] == "bad_path"


def test_sizes_texts_and_numbers():
    limits = Limits(max_sizes=2)
    assert validation.sizes({"batch_size": 16, "scale": 0.5}, limits) == {"batch_size": 16, "scale": 0.5}
    assert isinstance(validation.sizes({"n": 16}, limits)["n"], int)
    for bad in ({"not an id": 1}, {"n": True}, {"n": math.nan}, {"n": math.inf}, {"n": "16"}, [1]):
        assert refusal(validation.sizes, bad, limits) == ("bad_value", "sizes")
    assert refusal(validation.sizes, {"a": 1, "b": 2, "c": 3}, limits) == ("too_large", "sizes")
    assert refusal(validation.text, "é" * 6, "q", 10) == ("too_large", "q")  # bytes, not characters
    assert refusal(validation.text, "  ", "q", 10) == ("bad_value", "q")
    assert refusal(validation.integer, 2.0, "k", 1, 5)[0] == "bad_value"
    assert refusal(validation.integer, 6, "k", 1, 5)[0] == "bad_value"


def test_llm_specs_name_files_only_inside_the_workspace(ws, tmp_path):
    assert runs.llm_spec(ws, None) is None
    assert runs.llm_spec(ws, "exchange") == "exchange"
    assert runs.llm_spec(ws, "openai:gpt-5") == "openai:gpt-5"
    assert runs.llm_spec(ws, "record:answers.jsonl=openai:gpt-5") == "record:answers.jsonl=openai:gpt-5"
    assert refusal(runs.llm_spec, ws, "replay:/etc/passwd") == ("bad_path", "llm")
    assert refusal(runs.llm_spec, ws, f"exchange:{tmp_path / 'shelf'}") == ("bad_path", "llm")  # read-only
    assert refusal(runs.llm_spec, ws, "gpt-5") == ("bad_value", "llm")
    assert refusal(runs.llm_spec, ws, "teleport:x") == ("bad_value", "llm")


def test_sizes_never_pass_for_search_settings():
    assert runs.size_settings({"batch_size": 16, "scale": 0.5}) == ["--set", "batch_size=16", "--set", "scale=0.5"]
    assert refusal(runs.size_settings, {"iterations": 99}) == ("bad_value", "sizes")


def test_rules_pass_through_where_the_judge_has_rule_sets(ws):
    pytest.importorskip("mcp.server.mcpserver")
    from kernelwright.judge import JudgeConfig
    from kernelwright.mcp.tools import Tools

    tools = Tools(ws)
    assert tools._config(trials=3, sizes={"n": 4}, time=False).trials == 3
    if "rules" in {f.name for f in dataclasses.fields(JudgeConfig)}:
        assert tools._config(rules="strict").rules == "strict"
    else:
        assert refusal(tools._config, rules="strict") == ("unsupported", "rules")


def test_trim_keeps_head_and_tail():
    text = "head " + "x" * 5000 + " tail"
    short = summaries.trim(text, 300)
    assert len(short) < 360 and short.startswith("head ") and short.endswith(" tail") and "cut" in short
    assert summaries.trim("short", 300) == "short" and summaries.trim(None, 3) is None


def test_verdict_summary_keeps_what_decides_the_next_edit():
    verdict = {
        "status": "fail", "stage": "done", "error": "E" * 5000,
        "compile": {"ok": True, "backend": "triton", "seconds": 0.5, "cached": False, "log": "L" * 9000},
        "trials": [{"trial": i, "variant": "given", "ok": i == 0, "max_abs_err": 0.5, "rel_l2_err": 0.1 * i,
                    "message": "mismatch " * 200} for i in range(5)],
        "flags": [{"code": "torch_op", "severity": "reject", "message": "calls softmax"}],
        "timing": None, "baselines": None, "speedup": {}, "floor": None, "device": "cpu",
        "environment": {"hostname": "x"}, "process": {"wall_s": 3.21, "network_isolated": True},
    }
    out = summaries.verdict_summary(verdict)
    assert out["status"] == "fail" and not out["passed"] and len(out["error"]) < 1600
    assert out["trials"]["passed"] == 1 and out["trials"]["total"] == 5 and len(out["trials"]["failed"]) == 3
    assert len(out["trials"]["failed"][0]["message"]) < 360 and out["trials"]["worst_rel_l2_err"] == 0.4
    assert "log" not in out["compile"] and out["flags"][0]["code"] == "torch_op"
    assert "environment" not in out and out["network_isolated"] is True


def test_profile_summary_gives_class_findings_and_shares():
    report = {"status": "ok", "device": "cuda", "bottleneck": "memory", "plain_ms_per_call": 0.5123456,
              "kernels": [{"name": "relu_kernel", "launches": 1, "time_us": 540.2, "share": 0.987654,
                           "bottleneck": "memory", "reason": "DRAM 91%", "confident": True, "numbers": {"a": 1}}],
              "findings": [{"text": "at the memory roof", "tags": ["operator-fusion"], "kind": "action",
                            "kernel": "relu_kernel", "numbers": {}, "impact": 0.9, "rank": 1}],
              "notes": [], "overhead_s": {"total": 35.2}}
    out = summaries.profile_summary(report)
    assert out["bottleneck"] == "memory" and out["kernels"][0]["share"] == 0.988
    assert out["findings"][0] == {"text": "at the memory roof", "tags": ["operator-fusion"], "kind": "action",
                                  "kernel": "relu_kernel"}
    assert out["profile_seconds"] == 35.2 and summaries.profile_summary(None) is None


def test_http_address_parsing():
    pytest.importorskip("mcp.server.mcpserver")
    from kernelwright.mcp.server import is_loopback, parse_http

    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http("[::1]:9000") == ("::1", 9000)
    for bad in ("8765", "host:", ":80", "h:99999", "h:x"):
        with pytest.raises(ValueError):
            parse_http(bad)
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
