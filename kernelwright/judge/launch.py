"""Start a program that runs candidate code, confined afresh, under its own pid:
`python -m kernelwright.judge.launch --scratch S --writable W ... [--keep CAP] [--require | --off] SPEC.json`.

Only the trusted supervisor starts this, directly or as the program Nsight Compute profiles
(`profilehost`); its arguments are the supervisor's, never the candidate's. It

1. confines itself (`confine.confine`, the worker's rules: writable only the candidate's work and
   output folders, device files and this process's own /proc entries; other scratch folders
   unreadable; no signals, ptrace or abstract UNIX sockets outside; capabilities dropped except
   `--keep`). This is a fresh Landlock domain, not one nested in the worker's, so "its own /proc
   entries" are those of this pid, which the program keeps: CUDA's driver writes some of them,
   which a process the confined worker started could never be allowed (Landlock rules name paths
   that exist when the rules are made, and the worker's domain stays in force in all it starts);
2. prints one line `kw-launch: {confinement report}` on stderr, before any candidate code exists;
3. reads SPEC (the program, its environment and folder, as the worker asked: data, read only once
   confined) and replaces itself with the program (`execve` keeps the pid and the confinement).

The program's environment is SPEC's plus what the process that started this one added to the
supervisor's (`base_env` in SPEC): Nsight Compute's injection variables, so ncu still reaches it.
With `--require` (the worker was confined) a confinement that fails refuses to run anything (exit
125); with `--off` (`JudgeConfig(confine=False)`) only no_new_privs is set, as for the worker.
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import shutil
import sys

from .confine import ConfinementReport, confine

MARKER = "kw-launch: "
REFUSED = 125


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.launch")
    parser.add_argument("spec")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--writable", action="append", default=[])
    parser.add_argument("--keep", action="append", default=[])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--require", action="store_true")
    mode.add_argument("--off", action="store_true")
    return parser.parse_args(argv)


def confine_self(args: argparse.Namespace) -> dict:
    if args.off:
        ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # no_new_privs: marks it
        return ConfinementReport(reason="switched off (config.confine is False)", no_new_privs=True).to_dict()
    report = confine(args.scratch, args.writable, keep_capabilities=args.keep)
    if report.threads > 1:  # threads a preloaded library started; execve below ends them all but this one
        report.reason = f"{report.threads} threads when confined, ended by the execve that follows"
    return report.to_dict()


def digests(env: dict[str, str]) -> dict[str, str]:
    """A digest of each variable's value: the spec names the supervisor's environment without its values."""
    return {k: hashlib.sha256(v.encode(errors="surrogateescape")).hexdigest()[:24] for k, v in env.items()}


def program_env(spec: dict) -> dict[str, str]:
    """SPEC's environment plus what this process's starter added to or changed in `base_env`."""
    base, mine = spec.get("base_env") or {}, digests(dict(os.environ))
    added = {k: v for k, v in os.environ.items() if base.get(k) != mine[k]}
    return {**{str(k): str(v) for k, v in (spec.get("env") or {}).items()}, **added}


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    report = confine_self(args)
    print(MARKER + json.dumps(report), file=sys.stderr, flush=True)
    if args.require and not report.get("active"):
        print(f"kw-launch: refused: the worker was confined and this process could not be "
              f"({report.get('reason')})", file=sys.stderr, flush=True)
        return REFUSED
    try:
        with open(args.spec) as handle:
            spec = json.load(handle)
        program = [str(a) for a in spec["argv"]]
        env = program_env(spec)
        os.chdir(spec.get("cwd") or ".")
        os.execve(_which(program[0], env), program, env)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
        print(f"kw-launch: cannot start the program: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return 127


def _which(name: str, env: dict[str, str]) -> str:
    return name if os.sep in name else shutil.which(name, path=env.get("PATH")) or name


if __name__ == "__main__":
    sys.exit(main())
