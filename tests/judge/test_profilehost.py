"""The profile's processes started by the supervisor (`judge/profilehost.py`), over a real service socket:
the runner confined afresh with its own /proc entries, ncu composed by the supervisor from checked
names with its target confined the same way, ncu's options allow-listed, and the profile's ncu
stages driven through it. A stand-in ncu (a Python script, below) starts its target as ncu does,
adding a variable of its own, and prints hand-written CSV samples on `--import`."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from kernelwright.judge import service
from kernelwright.judge.confine import landlock_abi
from kernelwright.judge.profilehost import ProfileHost, ServiceExecutor, _plan, loopback_up, split_launch_line
from kernelwright.profile import ProfileConfig, ProfileReport, stages
from kernelwright.profile.context import ProfileRun
from kernelwright.profile.ncu import NcuPlan

sys.path.insert(0, str(Path(__file__).parent))
from test_launch import PROBE, REPO, _scratch  # noqa: E402

HANDWRITTEN = REPO / "tests" / "profile" / "fixtures" / "handwritten"
needs_landlock = pytest.mark.skipif(landlock_abi()[0] < 1, reason=f"no Landlock here: {landlock_abi()[1]}")

FAKE_NCU = r"""#!{python}
import os, subprocess, sys
args = sys.argv[1:]
with open({log!r}, "a") as log:
    log.write(" ".join(args) + "\n")
if args == ["--query-metrics"]:
    sys.exit(1)
if args[0] == "--import":
    page = args[args.index("--page") + 1] if "--page" in args else "raw"
    name = {{"stage1": "source_page.csv" if page == "source" else "stage1_raw.csv"}}
    print(open(os.path.join({hand!r}, name[os.path.basename(args[1]).split(".")[0]])).read(), end="")
    sys.exit(0)
base = args[args.index("--export") + 1]
open(base + ".ncu-rep", "w").write("report")
start = next(i for i in range(1, len(args)) if args[i] == "-m" and args[i + 1] == "kernelwright.judge.launch") - 1
sys.exit(subprocess.run(args[start:], env={{**os.environ, "KW_INJECTED": "by ncu"}}).returncode)
"""


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A scratch folder, a ProfileHost serving it over a socket the test process may ask, a stand-in ncu."""
    mine = _scratch(tmp_path)
    log = tmp_path / "ncu.log"
    fake = tmp_path / "bin" / "ncu"
    fake.parent.mkdir()
    fake.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), hand=str(HANDWRITTEN)))
    fake.chmod(0o755)
    monkeypatch.setenv("KW_NCU", str(fake))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    flags = ["--scratch", str(mine), "--writable", str(mine / "work")]
    flags += ["--require"] if landlock_abi()[0] >= 1 else []
    launched: list[dict] = []
    profile_host = ProfileHost(mine / "trusted" / "profile", flags, 120.0, launched.append)
    server = service.Server(mine / "trusted", {"profile": profile_host.handle})
    server.start()
    monkeypatch.setenv(service.ENV_VAR, str(server.path))
    yield mine, log, launched, profile_host
    server.close()


def _env(mine: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", ""), "KW_SPEC_VAR": "from the worker"}


def _probe(mine: Path) -> list[str]:
    return [sys.executable, "-c", PROBE, str(mine)]


@needs_landlock
def test_the_runner_is_started_by_the_supervisor_confined_with_its_own_proc_entries(host):
    mine, _, launched, _ = host
    executor = ServiceExecutor()
    result = executor.run(_probe(mine), 60, _env(mine), str(mine / "work"))
    assert result.ok, result.output
    seen = json.loads(result.output)  # the launcher's own line was taken out
    assert seen["write_own_proc"] == "ok" and seen["write_parent_proc"].startswith("refused")
    assert seen["write_outside"].startswith("refused") and seen["read_other"].startswith("refused")
    assert seen["env"]["KW_SPEC_VAR"] == "from the worker" and seen["cwd"] == str(mine / "work")
    assert executor.confinements[0]["active"] and "/proc/self" in executor.confinements[0]["devices"]
    assert launched[0]["action"] == "run" and launched[0]["confinement"]["active"]


@needs_landlock
def test_ncu_is_composed_by_the_supervisor_and_its_target_confined_afresh(host):
    mine, log, launched, _ = host
    plan = NcuPlan(["SpeedOfLight"], ["gpu__time_duration.sum"], 4, ["add_kernel"])
    result = ServiceExecutor().collect("candidate-chosen-ncu", plan, mine / "work" / "elsewhere" / "stage1",
                                       _probe(mine), 60, _env(mine))
    assert result.ok, result.output
    report = mine / "trusted" / "profile" / "stage1.ncu-rep"
    assert result.report == str(report) and report.read_text() == "report"  # in the supervisor's folder
    call = log.read_text().splitlines()[0]
    assert f"--export {mine / 'trusted' / 'profile' / 'stage1'}" in call and "--section SpeedOfLight" in call
    assert "--launch-count 4" in call and "regex:^(add_kernel)$" in call
    seen = json.loads(result.output)
    assert seen["env"] == {"KW_SPEC_VAR": "from the worker", "KW_INJECTED": "by ncu", "KW_SUPERVISOR_ONLY": None}
    assert seen["write_own_proc"] == "ok" and seen["write_outside"].startswith("refused")
    assert launched[0]["action"] == "collect" and launched[0]["confinement"]["active"]


def test_ncu_runs_only_with_allow_listed_arguments_and_names(host):
    mine, log, _, profile_host = host
    executor = ServiceExecutor()
    report = mine / "trusted" / "profile" / "stage1.ncu-rep"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("report")
    assert profile_host.refuse_ncu_args(["--query-metrics"]) == ""
    assert profile_host.refuse_ncu_args(["--import", str(report), "--csv", "--page", "raw", "--print-units", "base",
                                         "--print-kernel-base", "function"]) == ""
    refused = {
        "outside": ["--import", "/etc/hostname", "--csv"],
        "not a report": ["--import", str(mine / "trusted" / "profile" / "launch-1.json")],
        "option": ["--import", str(report), "--section-folder", str(mine / "work")],
        "value": ["--import", str(report), "--page", "../../x"],
        "collect": ["--export", "/etc/x", "--", "true"],
    }
    for name, args in refused.items():
        result = executor.ncu("ncu", args, 30)
        assert not result.ok and "did not start it" in result.error, name
    with pytest.raises(ValueError, match="not a section or metric"):
        _plan({"sections": ["--section-folder=/tmp"]})
    assert _plan({"kernel_names": ["void k<4>(float*)"], "launch_count": 10**9}).kernel_names == []
    assert _plan({"launch_count": 10**9}).launch_count == 10000
    with pytest.raises(service.ServiceError, match="not a stage name"):  # the client sends a name; a raw request
        service.call("profile", action="collect", stage="../x", plan={}, argv=_probe(mine), env={}, timeout_s=30)
    assert not log.exists()  # nothing refused ever reached ncu


def test_the_profile_stages_run_through_the_supervisor(host, tmp_path):
    """The collection and its source page, every ncu call made by the supervisor; imports of its reports."""
    mine, log, _, _ = host
    work = mine / "work" / "profile"
    work.mkdir()
    stages._QUERY_CACHE.clear()
    run = ProfileRun(ProfileConfig(hot_kernels=3), work, ProfileReport("p.py", "c.py"),
                     Path("p.py"), Path("c.py"), ServiceExecutor())
    run.runner_cmd = lambda mode, out, calls: [sys.executable, "-c", "print('runner')"]
    kernels = stages.ncu_passes(run)
    assert kernels, [f.text for f in run.report.findings]
    stages.attach_kernels(run, kernels, None)
    assert [k.bottleneck for k in run.report.kernels] == ["latency", "compute", "memory"]
    assert run.report.kernels[0].hotspots  # the collection's source page, imported by the supervisor
    calls = log.read_text().splitlines()
    assert calls[0] == "--query-metrics" and sum("--export" in c for c in calls) == 1
    assert all(str(mine / "trusted" / "profile") in c for c in calls if c.startswith("--import"))


def test_the_workers_plan_reaches_ncu_whole_launches_skipped_included(tmp_path):
    from dataclasses import asdict

    from kernelwright.profile.ncu import collect_command

    asked = NcuPlan(["LaunchStats"], ["gpu__time_duration.sum"], 3, ["add_kernel"], launch_skip=2)
    plan = _plan(json.loads(json.dumps(asdict(asked))))  # as the request carries it
    assert plan == asked
    cmd = collect_command("ncu", plan, tmp_path / "stage1", ["prog"])
    assert cmd[cmd.index("--launch-skip") + 1] == "2" and cmd[cmd.index("--launch-count") + 1] == "3"
    assert _plan({"launch_count": 2}).launch_skip == 0  # an older worker's plan: nothing skipped
    assert _plan({"launch_skip": -5}).launch_skip == 0 and _plan({"launch_skip": 10**9}).launch_skip == 10000


def test_the_launchers_line_is_taken_out_of_the_output():
    out, report = split_launch_line('==PROF== x\nkw-launch: {"active": true}\nhello\nkw-launch: {"active": false}\n')
    assert report == {"active": True} and out == '==PROF== x\nhello\nkw-launch: {"active": false}\n'
    assert split_launch_line("nothing\n")[1]["active"] is False


def test_loopback_up_says_what_happened():
    assert loopback_up().startswith(("loopback already up", "loopback brought up", "loopback not brought up"))


def test_a_judged_profile_runs_its_runner_through_the_supervisor_confined(tmp_path, monkeypatch):
    """End to end on a CPU: the verdict's profile was recorded by a runner the supervisor started,
    confined afresh (its own /proc entries writable), which the verdict says."""
    from integrity_attacks import LEGIT, PROBLEM

    from kernelwright.judge import JudgeConfig
    from kernelwright.judge.api import judge

    monkeypatch.delenv(service.ENV_VAR, raising=False)
    verdict = judge(PROBLEM, LEGIT, JudgeConfig(cache_dir=str(tmp_path / "cache"), profile=True, trials=1,
                                                time=False, baselines=()))
    assert verdict.status == "pass", verdict.error
    assert verdict.profile["status"] == "partial" and verdict.profile["timeline"]["calls"] > 0
    (runner,) = verdict.process.isolation["profiled_processes"]
    assert runner["action"] == "run" and runner["returncode"] == 0
    if landlock_abi()[0] >= 1:
        assert verdict.process.confined and runner["confined"] and runner["own_proc_writable"]
        assert runner["capabilities"] in ("dropped all except CAP_SYS_ADMIN", "none held")
