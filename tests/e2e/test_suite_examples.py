"""The suite of the shipped examples, driven by hand-written answers, end to end on the CPU:
`kernelwright optimize examples/problems` runs the three problems in one suite folder, then
`kernelwright report` writes the results table, whose numbers are checked against the verdicts
stored in the runs, and whose page a real browser renders (when Chromium is installed).

With `--eval batch` and `--llm exchange`, the same suite puts every problem's prompts in one
folder and every evaluation in one batch folder: one `judge --batch` call and one `--resume`.
"""
from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import suite_scenario as scenario

sys.path.insert(0, str(scenario.REPO / "tests" / "report"))
import browser  # noqa: E402

PAUSED = 75
# the suite's runs and the report on a loaded machine: every CLI call below is bounded by
# e2e_scenarios.CLI_TIMEOUT_S, the module-scope suite (set up by the first test) by twice that
pytestmark = pytest.mark.timeout(3000)


def kw(*args: str, cwd: Path, timeout: float = scenario.CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernelwright", *args], cwd=cwd, env=scenario.env(),
                          capture_output=True, text=True, timeout=timeout)


def stored_speedup(run_dir: Path) -> float | None:
    """The best passing speedup over eager, read straight from the run's database."""
    with sqlite3.connect(run_dir / "run.sqlite") as db:
        rows = db.execute("select speedup_eager from verdicts where status = 'pass'").fetchall()
    return max((r[0] for r in rows), default=None)


@pytest.fixture(scope="module")
def replayed_suite(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("examples-suite")
    suite = work / "suite"
    done = scenario.cli(scenario.optimize_args(suite, f"replay:{scenario.CASSETTE}"), cwd=work,
                        timeout=2 * scenario.CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stdout + done.stderr  # every run finished (one without a correct kernel)
    return suite


def test_the_suite_report_numbers_come_from_the_stored_verdicts(replayed_suite):
    suite = replayed_suite
    manifest = json.loads((suite / "suite.json").read_text())
    assert [e["name"] for e in manifest["entries"]] == ["linear_relu", "row_softmax", "scale_bias_gelu"]
    done = kw("report", str(suite), "--title", "shipped examples", "--json", cwd=suite.parent)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    speedups = {name: stored_speedup(suite / name) for name in scenario.CORRECT + scenario.FAILED}
    assert speedups["linear_relu"] is None and all(speedups[n] for n in scenario.CORRECT)
    overall = report["summaries"]["kernelbench"]["all"]
    assert (overall["n"], overall["correct"]) == (3, 2)
    eager = overall["by_baseline"]["eager"]
    right = [speedups[n] for n in scenario.CORRECT]
    assert eager["geomean_all"] == pytest.approx(math.prod(right + [1.0]) ** (1 / 3))  # failed = 1.0x
    assert eager["geomean_correct"] == pytest.approx(math.prod(right) ** 0.5)
    assert eager["mean_all"] == pytest.approx((sum(right) + 1.0) / 3)
    assert eager["fast"]["0"] == pytest.approx(2 / 3)
    assert eager["fast"]["1"] == pytest.approx(sum(s > 1 for s in right) / 3)
    assert overall["calls"] == 6 and overall["tokens"] > 0  # a planner and a coder call per problem
    problems = {p["name"]: p for p in report["problems"]}
    tree = problems["row_softmax"]["tree"]
    assert [n["id"] for n in tree if n["on_best_path"]] == ["c0", "c1"]
    assert problems["linear_relu"]["results"]["kernelbench"]["correct"] is False
    assert "CPU wall time" in " ".join(report["devices"])
    markdown = (suite / "report" / "report.md").read_text()
    assert "| correct (of judged) | 67% (2) | 67% (2) |" in markdown and "| judged | 3 of 3 | 3 of 3 |" in markdown


def test_a_real_browser_renders_the_report_page(replayed_suite, tmp_path):
    if browser.chromium() is None:
        pytest.skip("no Chromium here (Debian: apt-get install chromium)")
    page = replayed_suite / "report" / "report.html"
    if not page.is_file():
        assert kw("report", str(replayed_suite), cwd=replayed_suite.parent).returncode == 0
    shot = browser.screenshot(page, tmp_path / "report.png", height=1600)
    assert browser.inked_share(shot, 0, 800) > 0.01  # text, tables and plots: not a blank page
    dom = browser.rendered_text(page)
    assert "Results under" in dom and "row_softmax" in dom and dom.count("<svg") >= 3


def answer_all(exchange: Path) -> int:
    from kernelwright.llm.exchange import read_answer

    answered = 0
    for sidecar_path in sorted(exchange.glob("*.request.json")):
        short = sidecar_path.name[: -len(".request.json")]
        if read_answer(exchange, short) is None:
            request = json.loads(sidecar_path.read_text())
            problem, role = request["request"]["metadata"]["problem"], request["request"]["role"]
            (exchange / request["answer_file"]).write_text(scenario.answer_for(problem, role))
            answered += 1
    return answered


def test_a_batch_suite_has_one_prompt_folder_one_batch_folder_and_one_resume(tmp_path):
    suite = tmp_path / "suite"
    args = scenario.optimize_args(suite, "exchange", "--eval", "batch", "--target", "h100")
    done = scenario.cli(args, cwd=tmp_path)
    rounds = 0
    while done.returncode == PAUSED and answer_all(suite / "exchange"):
        rounds += 1
        done = scenario.cli(["optimize", "--resume", str(suite), "--quiet"], cwd=tmp_path)
    assert done.returncode == PAUSED and rounds == 2, done.stdout + done.stderr  # planners, then coders
    requests = sorted(p.name for p in (suite / "evals").glob("*.request.json"))
    assert requests == [f"{n}--c1.request.json" for n in ("linear_relu", "row_softmax", "scale_bias_gelu")]
    assert f"kernelwright judge --batch {suite / 'evals'}" in done.stdout
    assert len(list((suite / "exchange").glob("*.prompt.md"))) == 6 and not list(suite.glob("*/exchange"))
    # the GPU side would run this on the one folder; here the CPU judges it (sizes as written: small)
    judged = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(suite / "evals"),
                             "--profile-budget", "0"], env=scenario.env(), capture_output=True, text=True,
                            timeout=scenario.CLI_TIMEOUT_S)
    assert judged.returncode == 0 and "3 verdicts written" in judged.stdout, judged.stdout + judged.stderr
    done = scenario.cli(["optimize", "--resume", str(suite), "--quiet", "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout[done.stdout.index("{"):])
    status = {item["name"]: (item["status"], item["best_id"]) for item in result["suite"]}
    assert status == {"linear_relu": ("done", None), "row_softmax": ("done", "c1"),
                      "scale_bias_gelu": ("done", "c1")}
