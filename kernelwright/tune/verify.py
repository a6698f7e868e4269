"""The judge checks that a template's default instance behaves like the kernel it came from.

A templatizer (an LLM, or a person) rewrites a kernel so that its parameters can vary; nothing
guarantees the rewrite kept the behaviour. Both the original and the default instance are judged
against the reference: the template is accepted when the default instance passes wherever the
original passes, and the comparison of their times shows whether the rewrite cost speed.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelwright.judge import JudgeConfig

from .template import Template


@dataclass
class VerifyResult:
    ok: bool
    message: str
    original: object  # Verdict
    default: object  # Verdict

    @property
    def time_ratio(self) -> float | None:
        """default time / original time, when both passed and were timed."""
        a, b = getattr(self.original, "timing", None), getattr(self.default, "timing", None)
        if a and b and self.original.passed and self.default.passed and a.median_ms > 0:
            return b.median_ms / a.median_ms
        return None


def verify_default(template: Template, original_source: str, problem, judge_config=None,
                   workdir: str | Path | None = None) -> VerifyResult:
    """Judge the original source and the template's default instance against `problem` (a path)."""
    from kernelwright.judge.scheduling.pool import JudgePool  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of tune/'s import, which the CLI and the agents load

    config = judge_config or JudgeConfig()
    folder = Path(workdir or tempfile.mkdtemp(prefix="kw-verify-"))
    folder.mkdir(parents=True, exist_ok=True)
    original_path = folder / "original.py"
    default_path = folder / f"{_stem(template.name)}_default.py"
    original_path.write_text(original_source)
    default_path.write_text(template.default_instance())
    problem_path = str(getattr(problem, "path", problem))
    original, default = JudgePool(config, compile_workers=2, cpu_workers=2).judge_many(
        [(problem_path, str(original_path)), (problem_path, str(default_path))])
    return VerifyResult(*_compare(original, default), original, default)


def _compare(original, default) -> tuple[bool, str]:
    if default.passed and original.passed:
        return True, "the default instance passes the judge, as the original does"
    if default.passed:
        return True, ("the default instance passes, but the original did not "
                      f"({original.status} at {original.stage}: {_first_line(original.error)})")
    if original.passed:
        return False, (f"the original passes but the default instance does not ({default.status} at "
                       f"{default.stage}): {_first_line(default.error)}; the template changed the kernel's behaviour")
    return False, (f"neither passes: original {original.status} at {original.stage}, default instance "
                   f"{default.status} at {default.stage}: {_first_line(default.error)}")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:300] if text else "no message"


def _stem(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40] or "template"
