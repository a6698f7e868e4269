"""results.py: runs are found as `kernelwright report` finds them; a folder without runs is bad input."""
from __future__ import annotations

import pytest

from kernelwright.models.results import best_candidates
from kernelwright.store.suite import SuiteError


def test_a_folder_without_runs_says_so(tmp_path):
    with pytest.raises(SuiteError, match="holds no run"):
        best_candidates(tmp_path)
    with pytest.raises(SuiteError, match="no such folder"):
        best_candidates(tmp_path / "missing")
