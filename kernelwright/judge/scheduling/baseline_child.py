"""The child process that measures one problem's baselines for the batch runner, shared by the
baseline lane (`baseline_lane`: which kinds it measured now) and the reference timing
(`reference_timing`: the record a search reads). Each runs as `python -m` of its own module, whose
`main` hands this one what to print.

The child runs `baseline.get_baselines` with the device named as the supervisor names it
(`supervisor.device_label`), so its records are the ones the candidates' supervisors read; it dies
with its parent (`guards.die_with_parent`) and prints one JSON line, the last of its stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Callable

from ..config import JudgeConfig


@dataclass(frozen=True)
class Measured:
    """What one child measured, for the caller's reply."""

    problem: str  # the problem file
    config: JudgeConfig
    device: str  # as the worker resolves it ("cuda", "cpu", ...)
    label: str  # the device's name, as the supervisor keys baselines
    baselines: Any  # verdict.Baselines


def command(module: str, task) -> list[str]:
    """`python -m MODULE` measuring a lane task (`baseline_lane.LaneTask`): what `main` parses."""
    return [sys.executable, "-m", module, "--problem", str(task.problem), "--overrides", json.dumps(task.overrides),
            "--config", json.dumps(task.config.to_dict()), "--device", task.device]


def main(argv: list[str] | None, module: str, reply: Callable[[Measured], dict[str, Any]],
         unnamed: Callable[[str], dict[str, Any]]) -> int:
    """Parse `command`'s arguments, measure, print `reply(measured)` as one JSON line (exit 0), or
    `unnamed(device)` when the device cannot be named without torch (exit 1)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--overrides", default="{}", help="JSON object")
    parser.add_argument("--config", default="{}", help="JudgeConfig as JSON")
    parser.add_argument("--device", required=True)
    args = parser.parse_args(argv)
    # the measuring modules are imported in the child only: the batch runner imports this one and stays light
    from ..baseline import get_baselines  # noqa: PLC0415 -- in the child only
    from ..guards import die_with_parent  # noqa: PLC0415 -- in the child only
    from ..supervisor import device_label  # noqa: PLC0415 -- in the child only

    die_with_parent()
    config = JudgeConfig.from_dict(json.loads(args.config))
    label = device_label(args.device, "")
    if not label:
        print(json.dumps(unnamed(args.device)))
        return 1
    result = get_baselines(args.problem, json.loads(args.overrides), config, args.device, device_label=label)
    print(json.dumps(reply(Measured(args.problem, config, args.device, label, result)), default=str))
    return 0
