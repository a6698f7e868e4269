"""KernelBench's run layout, both ways.

KernelBench (github.com/ScalingIntelligence/KernelBench) keeps the kernels a model generated in
`runs/<run_name>/level_<L>_problem_<N>_sample_<S>_kernel.py` (each file a module defining
`ModelNew`), and its `scripts/eval_from_generations.py run_name=<run_name> level=<L> ...` judges
them against `KernelBench/level<L>/<N>_<name>.py`, writing `runs/<run_name>/eval_results.json`.
Problem N of level L is the file whose name starts with `N_` in that level's folder.

- `export_best(problems, out_dir, name)` writes the best correct candidate of each problem in
  that layout (one run folder per level and backend, sample 0), with `kernelwright_export.json`
  (which run and candidate each kernel is, our verdict's numbers) and `README.md` (the commands
  that make KernelBench's own scripts judge them);
- `find_generations(folder)` reads such a run folder, and `problem_file(root, level, N)` finds
  the problem each kernel was written for, so `kernelwright kernelbench import` can judge them
  with our judge.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

KERNEL_FILE = "level_{level}_problem_{problem}_sample_{sample}_kernel.py"
KERNEL_RE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
LEVEL_RE = re.compile(r"^level_?(\d+)$")
PROBLEM_RE = re.compile(r"^(\d+)_.+\.py$")
EXPORT_MANIFEST = "kernelwright_export.json"


def problem_key(problem_path: str | Path) -> tuple[int, int] | None:
    """(level, problem number) of a KernelBench problem file (`.../level1/19_ReLU.py`), else None."""
    path = Path(problem_path)
    level, number = LEVEL_RE.match(path.parent.name), PROBLEM_RE.match(path.name)
    if not (level and number):
        return None
    return int(level.group(1)), int(number.group(1))


def kernel_name(level: int, problem: int, sample: int = 0) -> str:
    return KERNEL_FILE.format(level=level, problem=problem, sample=sample)


@dataclass
class Exported:
    problem: str
    level: int
    problem_id: int
    run_name: str
    file: str
    run_dir: str  # our run folder
    candidate: str
    rules: str
    speedup: dict[str, float | None]
    median_ms: float | None
    device: str


@dataclass
class ExportResult:
    out_dir: Path
    exported: list[Exported] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # problem -> why it is not exported

    def run_names(self) -> dict[str, tuple[int, str]]:
        """KernelBench run name -> (level, backend)."""
        return {e.run_name: (e.level, e.run_name.rsplit("_", 1)[-1]) for e in self.exported}


def export_best(problems: list, out_dir: str | Path, name: str, rules: str | None = None) -> ExportResult:
    """Write each problem's best correct candidate (report.collect.ProblemResult, with its code) as
    sample 0 of `runs/<name>_level<L>_<backend>/`. Problems without a correct candidate, or whose
    file is not a KernelBench problem (levelL/N_name.py), are listed as skipped."""
    out = ExportResult(Path(out_dir))
    for p in problems:
        result = p.result(rules)
        key = problem_key(p.problem)
        if key is None:
            out.skipped[p.name] = f"{p.problem} is not named like a KernelBench problem (levelL/N_name.py)"
            continue
        if not result.correct or not p.best_code:
            out.skipped[p.name] = "no correct candidate" if result.known else f"not judged under {result.rules}"
            continue
        backend = _backend(p.best_code)
        run_name = f"{name}_level{key[0]}_{backend}"
        path = out.out_dir / "runs" / run_name / kernel_name(key[0], key[1])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(p.best_code)
        out.exported.append(Exported(p.problem, key[0], key[1], run_name, str(path.relative_to(out.out_dir)),
                                     p.run_dir, result.best_id or "", result.rules, dict(result.speedup),
                                     result.median_ms, p.device))
    _write_manifest(out)
    return out


def _backend(code: str) -> str:
    """KernelBench's eval takes a backend per run: CUDA C++ (load_inline / load) or Triton."""
    return "cuda" if ("load_inline" in code or "cpp_extension" in code) else "triton"


def _write_manifest(out: ExportResult) -> None:
    out.out_dir.mkdir(parents=True, exist_ok=True)
    data = {"exported": [asdict(e) for e in out.exported], "skipped": out.skipped,
            "layout": "KernelBench runs/<run_name>/level_<L>_problem_<N>_sample_<S>_kernel.py"}
    (out.out_dir / EXPORT_MANIFEST).write_text(json.dumps(data, indent=1) + "\n")
    lines = ["# kernelwright candidates in KernelBench's run layout", "",
             "Each kernel is the best correct candidate kernelwright found for the problem (sample 0);",
             f"`{EXPORT_MANIFEST}` says which run and candidate it is and what our judge measured.", "",
             "Judge them with KernelBench's own script, from a KernelBench checkout (its problems in",
             "`KernelBench/level<L>/`). The script walks every problem of the level (or the `subset` range",
             "you give it) and stops at a problem without a kernel, so give it the problems exported here:", "",
             "```bash"]
    for run_name, (level, backend) in sorted(out.run_names().items()):
        ids = sorted(e.problem_id for e in out.exported if e.run_name == run_name)
        for problem_id in ids:
            lines.append(f"python scripts/eval_from_generations.py run_name={run_name} "
                         f"runs_dir={(out.out_dir / 'runs').resolve()} dataset_src=local level={level} "
                         f"backend={backend} subset=\"({problem_id},{problem_id})\"")
    lines += ["```", "", f"Exported: {len(out.exported)}; skipped: {len(out.skipped)} "
              "(see the manifest for why)."]
    (out.out_dir / "README.md").write_text("\n".join(lines) + "\n")


@dataclass
class Generation:
    level: int
    problem_id: int
    sample: int
    path: Path


def find_generations(folder: str | Path, level: int | None = None) -> list[Generation]:
    """Kernel files of a KernelBench run folder (optionally one level), by level, problem, sample."""
    found = []
    for path in Path(folder).iterdir():
        match = KERNEL_RE.match(path.name)
        if match and path.is_file():
            gen = Generation(int(match.group(1)), int(match.group(2)), int(match.group(3)), path)
            if level is None or gen.level == level:
                found.append(gen)
    return sorted(found, key=lambda g: (g.level, g.problem_id, g.sample))


def problem_file(root: str | Path, level: int, problem_id: int) -> Path | None:
    """KernelBench problem N of level L under `root` (root/levelL/N_*.py; root may be the
    KernelBench folder of a checkout, or a folder with level1/, level2/ ...)."""
    for base in (Path(root), Path(root) / "KernelBench"):
        folder = base / f"level{level}"
        if folder.is_dir():
            matches = sorted(p for p in folder.glob(f"{problem_id}_*.py"))
            return matches[0] if matches else None
    return None


def group(generations: list[Generation], root: str | Path) -> tuple[dict[Path, dict[str, str]], dict[str, str]]:
    """({problem file: {candidate id: code}}, {kernel file: why skipped}) for an import."""
    by_problem: dict[Path, dict[str, str]] = {}
    skipped: dict[str, str] = {}
    for gen in generations:
        problem = problem_file(root, gen.level, gen.problem_id)
        if problem is None:
            skipped[gen.path.name] = f"no problem {gen.problem_id} of level {gen.level} under {root}"
            continue
        by_problem.setdefault(problem, {})[f"s{gen.sample}"] = gen.path.read_text()
    return by_problem, skipped


def summary(data: Any) -> str:
    return json.dumps(data, indent=1)
