"""Exit codes, the same for every `kernelwright` command and every run (docs/cli.md): their one
home, below every folder that decides one (the CLI, the run drivers, the MCP server reading a
finished run's code, the exchange provider's pause), so none of them spells a number.

    0   done: the work asked for succeeded (a candidate passed, a run finished with a result)
    1   failed: it ran and did not succeed (no correct candidate, a failed candidate, a missing
        package or compiler on this machine, a run that cannot go on)
    2   usage or bad input: a wrong flag or value, a file that does not exist or does not load,
        a config file with an error, a run folder that holds no run
    75  paused: a run waits for something outside it (exchange answers, batch verdicts);
        continue with `kernelwright optimize --resume RUN_DIR` (EX_TEMPFAIL)
    130 interrupted: stopped by Ctrl-C or SIGTERM (128 + SIGINT, what a shell reports); what was
        done is stored, resume continues it

Stdlib only: any folder but judge/ may import it (the judge's processes have codes of their own).
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PAUSED = 75
EXIT_INTERRUPTED = 130

MEANING = {EXIT_OK: "done", EXIT_FAILED: "failed", EXIT_USAGE: "usage error",
           EXIT_PAUSED: "paused: waiting for answers or verdicts", EXIT_INTERRUPTED: "stopped by a signal"}
