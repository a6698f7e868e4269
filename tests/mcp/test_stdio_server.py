"""`kernelwright mcp` over stdio, driven by the MCP SDK's client as an outside agent would: a real
server subprocess, real sandboxed judge runs (Triton in its interpreter on the CPU)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest

from mcp_helpers import EXAMPLES, call, client, example, read, server_env, wait_for_exit

pytest.importorskip("mcp.server.mcpserver")
pytestmark = pytest.mark.timeout(600)

TOOLS = {"judge", "profile", "baseline", "device_info", "skills_search", "skill", "optimize_start",
         "optimize_resume", "optimize_status", "optimize_best", "optimize_stop"}


def wrong_softmax() -> str:
    """The shipped softmax candidate with its normalisation dropped: it runs, and it is wrong."""
    _, code = example("row_softmax")
    broken = code.replace("tl.exp(x - row_max) / row_sum", "tl.exp(x - row_max)")
    assert broken != code
    return broken


def test_lists_the_tools_and_resources(tmp_path):
    async def scenario():
        async with client(tmp_path) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
            static = [str(r.uri) for r in (await session.list_resources()).resources]
            return tools, templates, static

    tools, templates, static = anyio.run(scenario)
    assert set(tools) == TOOLS
    judge = tools["judge"]
    assert set(judge.input_schema["properties"]) == {"problem", "candidate_code", "rules", "trials", "sizes", "time"}
    assert judge.input_schema["required"] == ["problem", "candidate_code"]
    assert "sandbox" in judge.description and "speed-of-light" in judge.description
    assert judge.annotations.read_only_hint and not tools["optimize_start"].annotations.read_only_hint
    assert "kernelwright://runs" in static
    assert {"kernelwright://problems/{+suite}", "kernelwright://runs/{run}/tree",
            "kernelwright://runs/{run}/prompts/{ask}"} <= set(templates)


def test_judges_a_correct_and_an_incorrect_shipped_example(tmp_path):
    problem, code = example("row_softmax")

    async def scenario():
        progress: list = []
        async with client(tmp_path) as session:
            good = await call(session, "judge", {"problem": problem, "candidate_code": code, "trials": 2},
                              progress)
            bad = await call(session, "judge", {"problem": problem, "candidate_code": wrong_softmax(),
                                                "trials": 2, "time": False})
        return good, bad, progress

    (good_error, good), (bad_error, bad), progress = anyio.run(scenario)
    assert not good_error and not bad_error  # a failing candidate is an answer, not a tool error
    assert good["status"] == "pass" and good["passed"] and good["stage"] == "done", good
    assert good["trials"] == {"passed": 2, "total": 2, "failed": [], "worst_rel_l2_err": good["trials"]["worst_rel_l2_err"]}
    assert good["compile"]["backend"] == "triton" and good["network_isolated"] is not None
    assert good["timing"]["median_ms"] > 0 and "eager" in good["speedup"]  # timed against eager PyTorch
    assert good["problem"].endswith("row_softmax.py")
    assert bad["status"] == "fail" and not bad["passed"] and bad["stage"] == "done"
    assert bad["trials"]["passed"] == 0 and bad["trials"]["failed"][0]["message"]
    assert "trials failed" in bad["error"] and bad["timing"] is None
    # progress notifications arrived while the first judge ran, naming the worker's stage
    assert progress and all(b[0] > a[0] for a, b in zip(progress, progress[1:], strict=False))
    assert any("judge" in message for _, message in progress)


def test_bad_paths_are_refused_and_the_server_keeps_answering(tmp_path):
    _, code = example("row_softmax")
    outside = tmp_path.parent / f"{tmp_path.name}_outside.py"
    outside.write_text((EXAMPLES / "problems" / "row_softmax.py").read_text())
    (tmp_path / "link.py").symlink_to(outside)  # inside the workspace, pointing out of it

    async def scenario():
        async with client(tmp_path) as session:
            answers = [await call(session, "judge", {"problem": p, "candidate_code": code})
                       for p in ("../" + outside.name, str(outside), "link.py", "missing.py", "/etc/passwd")]
            answers.append(await call(session, "optimize_status", {"run": "../../etc"}))
            answers.append(await call(session, "optimize_status", {"run": "no-such-run"}))
            tools = (await session.list_tools()).tools
        return answers, tools

    answers, tools = anyio.run(scenario)
    codes = [(error, data["error"]["code"]) for error, data in answers]
    assert codes == [(True, "bad_path")] * 5 + [(True, "bad_path"), (True, "not_found")]
    assert "outside the workspace" in answers[2][1]["error"]["message"]  # the link was followed
    assert answers[0][1]["error"]["field"] == "problem"
    assert len(tools) == len(TOOLS)  # still serving


def test_oversized_and_malformed_inputs_get_structured_errors(tmp_path):
    problem, code = example("row_softmax")
    huge = code + "\n# " + "x" * (300 * 1024)

    async def scenario():
        async with client(tmp_path) as session:
            return [
                await call(session, "judge", {"problem": problem, "candidate_code": huge}),
                await call(session, "judge", {"problem": problem, "candidate_code": code,
                                              "sizes": {f"n{i}": i for i in range(40)}}),
                await call(session, "judge", {"problem": problem, "candidate_code": code, "trials": 1000}),
                await call(session, "judge", {"problem": 42}),
                await call(session, "skills_search", {"query": "q" * 600}),
                await call(session, "no_such_tool", {}),
                await call(session, "optimize_start", {"problem": problem, "llm": "replay:/etc/passwd"}),
            ]

    answers = anyio.run(scenario)
    assert all(error for error, _ in answers)
    codes = [data["error"]["code"] for _, data in answers]
    assert codes == ["too_large", "too_large", "bad_value", "bad_value", "too_large", "not_found", "bad_path"]
    assert "262144" in answers[0][1]["error"]["message"] and answers[0][1]["error"]["field"] == "candidate_code"
    assert "candidate_code" in answers[3][1]["error"]["message"]  # the missing argument is named


def test_skills_search_then_one_skill(tmp_path):
    async def scenario():
        async with client(tmp_path) as session:
            found = await call(session, "skills_search", {"query": "row softmax running max", "op_kinds": ["softmax"],
                                                          "backend": "triton", "k": 3})
            one = await call(session, "skill", {"name": found[1]["skills"][0]["name"]})
            wrong = await call(session, "skills_search", {"query": "x", "op_kinds": ["teleport"]})
        return found, one, wrong

    (error, found), (one_error, one), (wrong_error, wrong) = anyio.run(scenario)
    assert not error and 1 <= len(found["skills"]) <= 3
    assert found["skills"][0]["name"] == "online-softmax" and found["skills"][0]["when"]
    assert not one_error and one["name"] == "online-softmax"
    for heading in ("## When", "## Steps", "## Pitfalls", "## Example"):
        assert heading in one["markdown"]
    assert wrong_error and wrong["error"]["field"] == "op_kinds"


def test_profile_baseline_and_device_info_on_the_cpu(tmp_path):
    problem, code = example("row_softmax")

    async def scenario():
        async with client(tmp_path) as session:
            return (await call(session, "device_info", {}),
                    await call(session, "baseline", {"problem": problem, "sizes": {"batch_size": 8}}),
                    await call(session, "profile", {"problem": problem, "candidate_code": code}),
                    await call(session, "profile", {"problem": problem, "candidate_code": wrong_softmax()}))

    (e1, device), (e2, base), (e3, prof), (e4, unprofiled) = anyio.run(scenario)
    assert not (e1 or e2 or e3 or e4)
    if device["device"] == "cuda":
        pytest.skip("CPU expectations; the GPU path is tests/mcp/test_gpu_transcript.py")
    assert device["environment"]["torch"] and "interpreter" in device["note"]
    assert base["device"] == "cpu" and base["sizes"]["batch_size"] == 8 and base["eager"]["median_ms"] > 0
    assert "compile_default" in base["errors"]  # skipped on a CPU, and said why
    assert prof["status"] == "pass" and prof["profile"]["device"] == "cpu"
    assert any("No CUDA device" in f["text"] for f in prof["profile"]["findings"])
    assert unprofiled["status"] == "fail" and unprofiled["profile"] is None and "not profiled" in unprofiled["message"]


def test_optimize_on_the_autopilot_start_status_best_resume_stop(tmp_path):
    problem = str(EXAMPLES / "problems" / "scale_bias_gelu.py")

    async def scenario():
        async with client(tmp_path) as session:
            error, started = await call(session, "optimize_start", {"problem": problem, "budget": 1})
            assert not error, started
            run = started["run"]
            first = await wait_for_exit(session, run)
            best = await call(session, "optimize_best", {"run": run})
            tree = json.loads(await read(session, f"kernelwright://runs/{run}/tree"))
            listing = json.loads(await read(session, "kernelwright://runs"))
            error, resumed = await call(session, "optimize_resume", {"run": run, "budget": 6})
            assert not error, resumed
            while (await call(session, "optimize_status", {"run": run}))[1].get("candidates", {}).get("total", 0) < 2:
                await anyio.sleep(0.5)
            stopped = await call(session, "optimize_stop", {"run": run})
            candidate = json.loads(await read(session, f"kernelwright://runs/{run}/candidates/t1"))
            return started, first, best, tree, listing, resumed, stopped, candidate

    started, first, (best_error, best), tree, listing, resumed, (stop_error, stopped), candidate = anyio.run(scenario)
    assert started["mode"].startswith("autopilot") and started["run_dir"].startswith("kw-runs/")
    assert first["process"] == {"state": "exited", "pid": first["process"]["pid"], "exit_code": 0, "meaning": "done"}
    assert first["status"] == "done" and first["mode"] == "autopilot"
    assert first["candidates"] == {"total": 1, "by_status": {"pass": 1}} and first["spend"]["evals"] == 1
    assert "--resume" in first["resume"]["cli"]
    assert not best_error and best["best"]["id"] == "t0" and best["best"]["verdict"]["passed"]
    assert "ModelNew" in best["best"]["code"] and "eager" in best["best"]["speedup"]
    assert any("kernelwright: best candidate" in line for line in best["best"]["evidence"])
    assert [n["id"] for n in tree["candidates"]] == ["c0", "t0"] and tree["best"] == "t0"
    assert [r["run"] for r in listing["runs"]] == [started["run"]]
    # resumed with a larger budget (t0 comes back from the run's tuning cache), then stopped midway
    assert resumed["resumed"] and resumed["process"]["state"] == "running"
    assert not stop_error and stopped["process"]["state"] == "exited", stopped
    assert stopped["status"] == "interrupted" and 2 <= stopped["candidates"]["total"] < 6
    assert stopped["budget"]["max_evals"] == 6
    assert candidate["id"] == "t1" and "ModelNew" in candidate["code"] and candidate["verdict"]["status"]


def test_an_exchange_run_pauses_and_its_stored_prompt_is_readable(tmp_path):
    problem = str(EXAMPLES / "problems" / "row_softmax.py")

    async def scenario():
        async with client(tmp_path) as session:
            error, started = await call(session, "optimize_start", {"problem": problem, "budget": 2,
                                                                    "llm": "exchange"})
            assert not error, started
            status = await wait_for_exit(session, started["run"])
            prompts = json.loads(await read(session, f"kernelwright://runs/{started['run']}/prompts"))
            text = await read(session, prompts["prompts"][0]["uri"])
            error, stop = await call(session, "optimize_stop", {"run": started["run"]})
            return status, prompts, text, (error, stop)

    status, prompts, text, (stop_error, stop) = anyio.run(scenario)
    assert status["process"]["exit_code"] == 75 and status["status"] == "paused", status
    assert "prompt" in status["detail"] and status["mode"] == "search"
    assert prompts["prompts"] and not prompts["prompts"][0]["answered"]
    assert text.startswith("# Prompt ") and "## system" in text and "## user" in text and "ModelNew" in text
    assert stop_error and stop["error"]["code"] == "conflict"  # nothing is running


def test_without_the_sdk_the_command_says_how_to_get_it(tmp_path):
    shadow = tmp_path / "shadow" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # an `mcp` without the server: as if the SDK were missing
    env = server_env()
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env["PYTHONPATH"]])
    done = subprocess.run([sys.executable, "-m", "kernelwright", "mcp"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert 'pip install "kernelwright[mcp]"' in done.stderr
