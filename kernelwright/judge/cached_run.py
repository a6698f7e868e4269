"""`python cached_run.py -m MODULE ARGS...`: run MODULE with the judge's build cache installed.

The profiler starts its own processes (`python -m kernelwright.profile.runner ...`, also under
ncu) that import the candidate again. Started through this stand-in interpreter (the worker
writes a `#!python` shim that calls `main`), those processes load the CUDA extension the judge
already built and hashed for this verdict instead of building it once more.
"""
from __future__ import annotations

import runpy
import sys


def main(cache_dir: str | None = None) -> None:
    """`cache_dir`: the judge's cache root, written into the shim by `profiling.build_cache_python`."""
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "-m":
        sys.exit("usage: <shim> -m MODULE [ARGS...]")
    try:
        from kernelwright.judge.compile import install_build_cache  # noqa: PLC0415 -- the shim runs the module even where the judge's build cache cannot be imported: it only adds the cache

        install_build_cache(cache_dir)  # a miss is answered by the judge's supervisor ($KW_JUDGE_SERVICE)
    except Exception as exc:  # noqa: BLE001 - without the cache the module still runs, building afresh
        print(f"kernelwright: build cache not installed ({type(exc).__name__}: {exc})", file=sys.stderr)
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
