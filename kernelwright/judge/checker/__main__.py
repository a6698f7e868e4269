"""`python -m kernelwright.judge.checker REQUEST.json [--phase evaluate|compile]`: the checker of one
evaluation, by hand (it starts its own runner). The sandboxed path forks it from the supervisor."""
from __future__ import annotations

import os
import sys

from .main import main

if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
