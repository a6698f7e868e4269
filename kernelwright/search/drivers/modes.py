"""Which driver a run goes to: its run mode, chosen here for the CLI (`kernelwright optimize`) and
the suite driver alike.

    search    the agents write candidates (session.py: SearchSession)
    autotune  no LLM configured: the built-in kernel templates are tuned (autotune.py)
    import    candidates written elsewhere are judged (imported.py; `kernelwright kernelbench import`)

A new run is `autotune` when no LLM is configured, else `search` (an imported run is only made by
`kernelbench import`); a resumed run keeps the mode it was made with, read from its store (a
suite's from its manifest).
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Callable

from kernelwright.store import RunStore, StoreError

from .autotune import MODE as AUTOTUNE
from .autotune import run_autotune
from .imported import MODE as IMPORT
from .imported import run_imported
from .session import RunOptions, RunOutcome, run_search

SEARCH = "search"
MODES = (SEARCH, AUTOTUNE, IMPORT)
Runner = Callable[..., RunOutcome]  # (options, on_progress=None) -> RunOutcome


def new_mode(no_model: bool) -> str:
    """The mode of a run about to be made: the template autotuner without an LLM, else the agents."""
    return AUTOTUNE if no_model else SEARCH


def stored_mode(run_dir: str | Path) -> str:
    """The mode a stored run was made with; "search" when unreadable (the session says what is wrong)."""
    try:
        with RunStore.in_dir(run_dir, create=False) as store:
            return (store.run().get("settings") or {}).get("mode", SEARCH)
    except (StoreError, OSError, sqlite3.Error):
        return SEARCH


def run_mode(options: RunOptions, no_model: bool = False) -> str:
    """The mode `options` run in: a resumed run's stored one, else a new run's (`no_model`: no LLM)."""
    return stored_mode(options.resume) if options.resume else new_mode(no_model)


def runner(mode: str) -> Runner:
    """The driver that runs one run of `mode`."""
    return {SEARCH: run_search, AUTOTUNE: run_autotune, IMPORT: run_imported}.get(mode, run_search)


def run_optimization(options: RunOptions, on_progress: Callable[[dict], None] | None = None,
                     no_model: bool = False) -> RunOutcome:
    """Start or resume a run with the driver of its mode (a resumed run without an LLM goes back to
    the template autotuner, a run of imported candidates to their judging)."""
    return runner(run_mode(options, no_model))(options, on_progress)
