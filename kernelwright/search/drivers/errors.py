"""The drivers' one error: a run that cannot start or resume (the CLI prints it, exit 2).

Its own module so that every driver module can raise it without importing session.py, which
imports most of them (no import cycle)."""
from __future__ import annotations


class RunError(RuntimeError):
    """The run cannot start or resume; the message says why and what to do."""
