"""`kernelwright optimize` without an LLM: which flags apply, and what the machine must have.

Without an LLM the template autotuner runs (search/drivers/autotune.py). Each flag is either
honoured or refused with a reason (exit 2), never silently ignored:

- honoured: --max-evals (instances judged), --max-minutes (active time; checked before each
  instance, so the run ends at most one instance's judging after the limit), --set judge.FIELD
  and problem size constants, --backend triton, --eval local, --eval batch (each round of instances
  becomes requests in a batch folder; --target names the device whose limits prune them),
  --eval-workers, --seed, --run-dir, --workspace, --config ([judge] and the budgets above from
  [optimize]), --quiet, --json, --resume;
- refused: --backend cuda (the templates are Triton), --strategy and search settings in --set
  (they steer the agents' search), --max-calls/--max-tokens/--max-usd (there is no LLM to spend
  on), --eval ray (the tuner judges here or through a batch folder), --skills (skills are for the
  agents).
"""
from __future__ import annotations

from typing import Any

REFUSED_LIMITS = ("max_calls", "max_tokens", "max_usd")


def refused_flags(*, backend: str | None, strategy: str | None, limits: dict[str, Any], search_sets: dict[str, Any],
                  eval_mode: str | None, skills: list[str]) -> list[str]:
    """A reason for each given flag that has no meaning without an LLM."""
    reasons = []
    if backend and backend != "triton":
        reasons.append(f"--backend {backend}: without an LLM only the built-in Triton templates are tuned")
    if strategy:
        reasons.append(f"--strategy {strategy}: strategies steer the agents' search; the template tuner "
                       "chooses its own (exhaustive when --max-evals covers the space, else TPE)")
    for name in REFUSED_LIMITS:
        if limits.get(name) is not None:
            reasons.append(f"--{name.replace('_', '-')}: there is no LLM to spend on")
    if search_sets:
        reasons.append(f"--set {', '.join(sorted(search_sets))}: search settings apply to the agents' search")
    if eval_mode and eval_mode.startswith("ray"):
        reasons.append(f"--eval {eval_mode}: the template tuner judges here (local) or through a batch folder (batch)")
    if skills:
        reasons.append("--skills: skills are retrieved into the agents' prompts")
    return reasons


def refusal_message(reasons: list[str]) -> str:
    lines = "\n".join(f"  {r}" for r in reasons)
    return (f"no LLM is configured, so the template autotuner would run, and it cannot honour:\n{lines}\n"
            "Drop these flags, or give --llm SPEC (or set KW_LLM) to let the agents write kernels.")


def missing_environment(backend: str, device: str) -> list[str]:
    """What this machine lacks to judge `backend` candidates locally (judge.preflight)."""
    from kernelwright.judge.preflight import missing_for  # noqa: PLC0415 -- judge code beyond what judge/__init__.py loads is kept out of the CLI's start: loaded when this command runs

    return missing_for(backend, device)
