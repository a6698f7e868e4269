"""Exit codes, the same for every `kernelwright` command (docs/cli.md):

    0   done: the work asked for succeeded (a candidate passed, a run finished with a result)
    1   failed: it ran and did not succeed (no correct candidate, a failed candidate, a missing
        package or compiler on this machine, a run that cannot go on)
    2   usage or bad input: a wrong flag or value, a file that does not exist or does not load,
        a config file with an error, a run folder that holds no run
    75  paused: a run waits for something outside it (exchange answers, batch verdicts);
        continue with `kernelwright optimize --resume RUN_DIR` (EX_TEMPFAIL)
    130 interrupted: stopped by Ctrl-C or SIGTERM; what was done is stored, resume continues it
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from kernelwright.llm.errors import EXIT_ANSWER_PENDING

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = EXIT_ANSWER_PENDING  # 75
EXIT_INTERRUPTED = 130


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
