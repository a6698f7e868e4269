"""Who wrote a result's best candidate: a seed file says so in its `# origin:` line, whatever the run's
mode; otherwise the mode tells (the autotuner's templates, the agents' code, an import)."""
from __future__ import annotations

from kernelwright.report.cells import problem_columns
from kernelwright.report.collect import ProblemResult, origin_of
from kernelwright.seed import ORIGIN

SEED_HEADER = f'"""a seed"""\n# origin: {ORIGIN}\n# written with: torch 2.13.0\nclass ModelNew: ...\n'


def test_a_seed_is_labelled_seed_in_any_run():
    for mode in ("search", "autotune", "import"):
        assert origin_of(mode, SEED_HEADER) == "seed"


def test_other_code_is_labelled_by_the_run_that_made_it():
    code = "# origin: something else\nclass ModelNew: ...\n"
    assert [origin_of(m, code) for m in ("search", "autotune", "import")] == ["model", "template", "imported"]
    assert origin_of("search", f"x = '# origin: {ORIGIN}'\n") == "model"  # the line, not a mention


def test_the_problem_table_shows_the_origin():
    columns = dict(problem_columns("kernelbench"))
    result = ProblemResult("p", "level1", "p.py", "run", origin="seed")
    assert columns["origin"](result) == "seed"
    assert columns["origin"](ProblemResult("q", "level1", "q.py", "run")) == "-"
