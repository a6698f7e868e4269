"""The judge: compile, check, guard, time and record one candidate, each in its own process.

Only torch, triton, numpy, the standard library and kernelwright's own `problem` and `profile`
folders may be imported here (`profile` imports only the standard library at import time): the
judge runs on GPU machines that hold nothing else.
"""
from .config import JudgeConfig
from .verdict import Verdict

__all__ = ["JudgeConfig", "Verdict", "judge"]


def judge(problem, candidate, config: JudgeConfig | None = None) -> Verdict:
    """Judge `candidate` (a file path) against `problem` (a file path) in a fresh process."""
    from .api import judge as _judge  # noqa: PLC0415 -- every judge process runs this __init__, the runner's too: api.py (sandbox, supervisor, fork server) loads only where a candidate is judged

    return _judge(problem, candidate, config or JudgeConfig())
