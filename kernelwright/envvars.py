"""Every environment variable kernelwright reads, in one list (docs/cli.md renders the same list),
but the LLM providers' keys.

The prefix is `KW_`. Variables that had a `KERNELWRIGHT_` name before still work under that name,
with a one-line deprecation note on stderr, until a later release drops them. A hosted provider's
key keeps its vendor's name (OPENAI_API_KEY, ANTHROPIC_API_KEY): each provider's entry in
`kernelwright/llm/providers.py` names it, and docs/providers.md lists them.

The judge's own variables (KW_CACHE_DIR, KW_LOCK_DIR, KW_KEEP_SCRATCH) are read by the judge
directly (it runs on machines that hold only its own package); they are listed here for the docs.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class EnvVar:
    name: str
    meaning: str
    old: str | None = None  # the deprecated name, still read
    prefix: bool = False  # a family: NAME<SUFFIX>, e.g. KW_LLM_ROLE_CODER


VARIABLES: tuple[EnvVar, ...] = (
    EnvVar("KW_LLM", "default LLM spec for every agent (like --llm)", old="KERNELWRIGHT_LLM"),
    EnvVar("KW_LLM_ROLE_", "LLM spec for one agent role, e.g. KW_LLM_ROLE_PLANNER=openai:gpt-5 "
           "(like --llm-role)", old="KERNELWRIGHT_LLM_ROLE_", prefix=True),
    EnvVar("KW_CONFIG", "the config file ([llm], [optimize], [judge]) when --config is not given; "
           "else ./kernelwright.toml", old="KERNELWRIGHT_LLM_CONFIG"),
    EnvVar("KW_SKILLS", "folder of user and candidate skills (default ~/.kernelwright/skills)",
           old="KERNELWRIGHT_SKILLS"),
    EnvVar("KW_EMBEDDING_MODEL", "sentence-transformers model for skill retrieval", old="KERNELWRIGHT_EMBEDDING_MODEL"),
    EnvVar("KW_NO_EMBEDDINGS", "1: BM25 only, never load an embedding model", old="KERNELWRIGHT_NO_EMBEDDINGS"),
    EnvVar("KW_CACHE_DIR", "judge caches: builds, baselines, device peaks (default ~/.cache/kernelwright)"),
    EnvVar("KW_LOCK_DIR", "folder of the per-device timing locks and GPU admission ledgers "
           "(default /tmp/kernelwright-locks-<uid>; CPU locks under the cache folder)"),
    EnvVar("KW_KEEP_SCRATCH", "1: keep each judge run's scratch folder (debugging)"),
    EnvVar("KW_JUDGE_MPS", "0: no private MPS server per GPU evaluation (the runner then times itself, and the "
           "verdict says so); unset or 1: one per evaluation where nvidia-cuda-mps-control exists"),
    EnvVar("KW_DEBUG_STACKS", "seconds: the judge's checker and runner print every thread's stack that often "
           "(to find where an evaluation hangs)"),
    EnvVar("KW_JUDGE_WARM", "0: start every pool evaluation in a fresh interpreter (no fork server); unset or 1: fork them from the pool's fork server (imports done once)"),
    EnvVar("KW_HEARTBEAT_S", "seconds without a progress line before long work (judging, baselines, LLM calls) "
           "prints what it is doing and for how long (default 30)"),
    EnvVar("KW_SEED_START", "0: new runs do not start from torch.compile's kernels (the default of the search "
           "setting seed_start; `--set seed_start=true` still turns it on)"),
    EnvVar("KW_TUNE_CACHE", "folder of the template tuner's measurement cache (default ~/.cache/kernelwright/tune)"),
    EnvVar("KW_NCU", "path of the ncu binary for profiling"),
    EnvVar("KW_KERNELBENCH", "tests and benches: folder of KernelBench problems (default ../shared/kernelbench)"),
    EnvVar("TRITON_INTERPRET", "1: run Triton kernels in the interpreter (set by the judge when there is no GPU)"),
)

_warned: set[str] = set()


def _note(old: str, new: str) -> None:
    if old not in _warned:
        _warned.add(old)
        print(f"kernelwright: {old} is deprecated; use {new}", file=sys.stderr)


def get(name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The variable's value, read under its old name (with a deprecation note) when only that is set."""
    env = os.environ if env is None else env
    value = env.get(name)
    if value:
        return value
    var = _by_name().get(name)
    if var is not None and var.old and env.get(var.old):
        _note(var.old, name)
        return env[var.old]
    return value


def with_prefix(prefix: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """{suffix: value} of a family (`KW_LLM_ROLE_`), old names first so new ones win."""
    env = os.environ if env is None else env
    var = _by_name().get(prefix)
    found: dict[str, str] = {}
    if var is not None and var.old:
        for name, value in env.items():
            if name.startswith(var.old) and value:
                _note(name, prefix + name[len(var.old):])
                found[name[len(var.old):]] = value
    for name, value in env.items():
        if name.startswith(prefix) and value:
            found[name[len(prefix):]] = value
    return found


def _by_name() -> dict[str, EnvVar]:
    return {v.name: v for v in VARIABLES}
