"""Can this machine judge candidates of a backend? Asked before a run starts, and of verdicts.

`missing_for(backend, device)` lists what is missing (a package, a compiler, a GPU) with the
command that fixes it, so a run stops before any work instead of failing every candidate.
`environment_error(verdict)` recognises a verdict that failed because of the machine (Triton not
installed, no compiler, no ninja) rather than the candidate's code: such a verdict must not be
blamed on the candidate, and the run stops with the cause on screen.
"""
from __future__ import annotations

import importlib.util
import re
import shutil
from typing import Any

from .toolchain import nvcc_path

TRITON_INSTALL = "pip install 'triton>=3.0'"

# (pattern over a failed verdict's texts, what to tell the user); {0} is the first group
_ENVIRONMENT_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"No module named '(triton|torch|numpy)'"),
     "the Python package {0} is not installed where the judge runs: pip install {0}"),
    (re.compile(r"Ninja is required to load C\+\+ extensions"),
     "ninja is not installed (torch builds C++/CUDA extensions with it): pip install ninja"),
    (re.compile(r"CUDA_HOME environment variable is not set"),
     "the CUDA toolkit (nvcc) is not found: install it, or set CUDA_HOME"),
    (re.compile(r"(?:No such file or directory|command not found)\W{0,4}(nvcc|c\+\+|g\+\+|gcc|cc)(?![\w+])"),
     "the compiler {0} is not installed or not on PATH"),
    (re.compile(r"Failed to find C compiler"),
     "Triton needs a C compiler (gcc or clang) to build its launcher: install one, or set CC"),
]


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_for(backend: str, device: str = "auto") -> list[str]:
    """What this machine lacks to judge `backend` ("triton", "cuda") candidates here; [] if nothing."""
    if backend == "triton":
        if not has_module("triton"):
            return [f"Triton is not installed; it is needed to judge Triton kernels: {TRITON_INSTALL} "
                    "(Linux), or judge on another machine with --eval batch"]
        return []
    if backend == "cuda":
        return _missing_for_cuda(device)
    return []


def _missing_for_cuda(device: str) -> list[str]:
    import torch  # noqa: PLC0415 -- preflight.py is imported without torch through outcome.py (the report, the batch runner's --retry-errors)

    problems = []
    if device == "cpu" or not torch.cuda.is_available():
        problems.append("CUDA C++ candidates need a CUDA GPU to be judged, and there is none here: "
                        "use --backend triton, or --eval batch and judge on a GPU machine")
    if not _nvcc():
        problems.append("nvcc (the CUDA toolkit) is not found: install it, or set CUDA_HOME")
    if not (shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")):
        problems.append("no C++ compiler (c++, g++ or clang++) on PATH: install one (e.g. build-essential)")
    if not (shutil.which("ninja") or has_module("ninja")):
        problems.append("ninja is not installed (torch builds extensions with it): pip install ninja")
    return problems


def _nvcc() -> str | None:
    return nvcc_path()


def environment_error(verdict: Any) -> str | None:
    """Why a failed verdict is the machine's fault, or None when it may be the candidate's.

    `verdict` is a Verdict or its dict. Only verdicts with status "error" (it could not be
    evaluated) are considered; a wrong or crashing candidate is never excused.
    """
    data = verdict if isinstance(verdict, dict) else _as_dict(verdict)
    if not data or data.get("status") != "error":
        return None
    compile_result = data.get("compile") or {}
    process = data.get("process") or {}
    texts = [data.get("error") or "", compile_result.get("log") or "",
             "\n".join(compile_result.get("errors") or []) if isinstance(compile_result.get("errors"), list)
             else str(compile_result.get("errors") or ""), process.get("stderr_tail") or ""]
    text = "\n".join(texts)
    for pattern, message in _ENVIRONMENT_PATTERNS:
        found = pattern.search(text)
        if found:
            return message.format(*found.groups())
    return None


def _as_dict(verdict: Any) -> dict:
    to_dict = getattr(verdict, "to_dict", None)
    return to_dict() if callable(to_dict) else {}
