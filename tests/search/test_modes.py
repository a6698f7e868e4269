"""The one run-mode chooser (search/drivers/modes.py): a new run's mode follows whether an LLM is
configured, a resumed run keeps the mode it was stored with, and each mode has its driver."""
from __future__ import annotations

from kernelwright.search.drivers import modes
from kernelwright.search.drivers.autotune import run_autotune
from kernelwright.search.drivers.imported import run_imported
from kernelwright.search.drivers.session import RunOptions, run_search
from kernelwright.store import RunStore


def stored_run(folder, settings: dict) -> str:
    with RunStore.in_dir(folder) as store:
        store.create_run("r1", problem_path="/p/relu.py", problem_name="relu", problem_hash="ab" * 32,
                         problem_source="print(1)", settings=settings)
    return str(folder)


def test_a_new_run_is_autotune_without_an_llm_else_search():
    assert modes.run_mode(RunOptions(problem="p.py"), no_model=True) == modes.AUTOTUNE == "autotune"
    assert modes.run_mode(RunOptions(problem="p.py"), no_model=False) == modes.SEARCH == "search"


def test_a_resumed_run_keeps_its_stored_mode_whatever_the_llm(tmp_path):
    tuned = stored_run(tmp_path / "tuned", {"mode": "autotune"})
    imported = stored_run(tmp_path / "imported", {"mode": "import"})
    searched = stored_run(tmp_path / "searched", {"search": {"strategy": "greedy"}})  # runs of the agents store none
    assert modes.run_mode(RunOptions(resume=tuned), no_model=False) == modes.AUTOTUNE
    assert modes.run_mode(RunOptions(resume=imported), no_model=True) == modes.IMPORT == "import"
    assert modes.run_mode(RunOptions(resume=searched), no_model=True) == modes.SEARCH
    assert modes.stored_mode(tmp_path / "no-run-here") == modes.SEARCH  # the session says what is wrong


def test_each_mode_has_its_driver():
    assert modes.runner(modes.SEARCH) is run_search
    assert modes.runner(modes.AUTOTUNE) is run_autotune
    assert modes.runner(modes.IMPORT) is run_imported
