"""Shared by the GPU evidence scripts: where the problems are, bench sizes, candidates, tables.

Bench scripts (not product code) may name problems: the candidates here are per-problem.
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CANDIDATES = REPO / "bench" / "candidates"

# GPU sizes trimmed so that each input is about 1 GB or less, keeping the dimension that matters
# (the 393216-wide softmax rows, the reduced dimension); gemm problems keep their sizes.
BENCH_OVERRIDES: dict[str, dict] = {
    "19_ReLU": {"batch_size": 512},
    "23_Softmax": {"batch_size": 512},
    "47_Sum_reduction_over_a_dimension": {"batch_size": 16},
    "5_Matrix_scalar_multiplication": {"M": 16384},
}


def kernelbench_root() -> Path:
    """$KW_KERNELBENCH, else shared/kernelbench in or beside the repository."""
    options = [os.environ.get("KW_KERNELBENCH"), REPO / "shared" / "kernelbench", REPO.parent / "shared" / "kernelbench"]
    for option in options:
        if option and Path(option, "level1").is_dir():
            return Path(option)
    sys.exit(f"KernelBench problems not found (tried {', '.join(str(o) for o in options if o)}); set KW_KERNELBENCH")


def problem_path(stem_or_rel: str) -> Path:
    """'level1/19_ReLU.py', a bare stem '19_ReLU' or a path in this repository
    ('examples/problems/row_softmax.py') -> the problem file."""
    if (REPO / stem_or_rel).is_file():
        return REPO / stem_or_rel
    root = kernelbench_root()
    if "/" in stem_or_rel:
        return root / stem_or_rel
    for level in ("level1", "level2", "level3"):
        path = root / level / f"{stem_or_rel}.py"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no KernelBench problem named {stem_or_rel}")


@dataclass
class Candidate:
    path: Path
    problem: Path
    backend: str  # "cuda", "triton", "adversarial" (adversarial/ and red_team/) or "legit"
    expect_pass: bool = True
    expect_flags: list[str] = field(default_factory=list)
    hack: str = ""

    @property
    def label(self) -> str:
        return self.path.stem


def correct_candidates() -> list[Candidate]:
    found = []
    for path in sorted(CANDIDATES.glob("*__*.py")):
        stem, backend = path.stem.rsplit("__", 1)
        found.append(Candidate(path, problem_path(stem), backend))
    return found


def adversarial_candidates(folder: str = "adversarial", backend: str = "adversarial") -> list[Candidate]:
    """Each file's header names its problem, the hack and the flags expected (`a|b`: any of).
    `folder`: "adversarial" (the first set), "red_team" (white-box attacks on the judge's own
    design) or "legit" (unusual kernels that must pass)."""
    found = []
    for path in sorted((CANDIDATES / folder).glob("*.py")):
        header = path.read_text()
        problem = re.search(r"^# problem: (\S+)", header, re.M)
        expect = re.search(r"^# expect: (.*)$", header, re.M)
        hack = re.search(r"^# hack: (.*?)(?: --|$)", header, re.M)
        flags = re.search(r"flags: (\S+)", expect.group(1)) if expect else None
        found.append(Candidate(path, problem_path(problem.group(1)), backend,
                               expect_pass=bool(expect and expect.group(1).startswith("pass")),
                               expect_flags=flags.group(1).split("|") if flags else [],
                               hack=hack.group(1).strip() if hack else path.stem))
    return found


def overrides_for(problem: Path, sizes: str) -> dict:
    return dict(BENCH_OVERRIDES.get(problem.stem, {})) if sizes == "bench" else {}


def flag_summary(verdict) -> str:
    return ",".join(f"{f.code}:{f.severity[0].upper()}" for f in verdict.flags if f.severity != "info") or "-"


def fmt(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=False)), "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)) for row in rows]
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def out_dir() -> Path:
    path = Path(os.environ.get("OUT") or "/tmp/kernelwright_bench_out")
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=1, default=str))
