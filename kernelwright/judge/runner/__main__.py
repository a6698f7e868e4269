"""`python -m kernelwright.judge.runner --fd N`: a runner started by hand or by a checker without a
supervisor (the judge's own tools and tests), serving the call channel on file descriptor N,
unconfined. The sandboxed path forks the runner from the supervisor instead."""
from __future__ import annotations

import argparse
import os
import sys

from .main import serve

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.runner")
    parser.add_argument("--fd", type=int, required=True, help="the call channel's socket")
    code = serve(parser.parse_args().fd)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the candidate's threads must not keep the process alive
