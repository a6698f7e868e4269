"""How a `kernelwright` command ends: SIGTERM taken as Ctrl-C, and an exit that does not wait for
judge threads. The codes themselves have one home, kernelwright/exits.py (below every folder
that decides one); the commands read them from here as `exits.EXIT_USAGE` (docs/cli.md).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from kernelwright.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PAUSED, EXIT_USAGE

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PAUSED", "EXIT_USAGE", "exit_now", "sigterm_interrupts"]


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM ends the command the way Ctrl-C does (status `interrupted`, best so far written)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def exit_now(code: int) -> None:
    """Exit with `code` without waiting for threads: judge evaluations in flight when the user
    stopped the run are not waited for (their worker processes die with this one; a resume
    judges them again). Falls back to a normal exit when no other thread is alive."""
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if not others:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
