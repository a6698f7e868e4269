"""Pick a bounded subset of KernelBench problems for a suite, most valuable first, as a list file.

    python bench/suite_pick.py LIST_FILE --problems N [--kernelbench DIR] [--levels 1 2]

"Most valuable first" here means: problems the built-in template library covers (the library
itself decides, on the meta device: the rest would fail without any GPU work), taken round-robin
over template families (the first of every family, then the second of every family, ...) so that a
small subset exercises as many templates as possible, single-kernel families first; within a
family, in sorted order (level 1 before level 2). No problem is named here. The list file holds paths relative to its own folder
(what `kernelwright optimize LIST_FILE` reads); a comment line per problem names its family.
Prints how many problems are covered in all, and how many the subset takes.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.optimize_autopilot_gpu import covered  # noqa: E402


def round_robin(families: dict[str, list[Path]]) -> list[tuple[Path, str]]:
    """(problem, family) in the order: each family's first, then each family's second, ...; families
    of fewer kernels first (quicker to judge, and what the combinations are made of), then the ones
    covering more problems."""
    order: list[tuple[Path, str]] = []
    depth = max((len(v) for v in families.values()), default=0)
    ranked = sorted(families, key=lambda f: (f.count("+"), -len(families[f]), f))
    for i in range(depth):
        for family in ranked:
            if i < len(families[family]):
                order.append((families[family][i], family))
    return order


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("list_file", type=Path)
    parser.add_argument("--problems", type=int, required=True, help="how many problems the subset takes")
    parser.add_argument("--kernelbench", type=Path, default=Path(os.environ.get("KW_KERNELBENCH", ROOT.parent / "shared" / "kernelbench")))
    parser.add_argument("--levels", nargs="+", default=["1", "2"])
    args = parser.parse_args()
    problems = sorted(p for level in args.levels for p in (args.kernelbench / f"level{level}").glob("*.py")
                      if not p.name.startswith("_"))
    if not problems:
        print(f"no problem under {args.kernelbench}/level{{{','.join(args.levels)}}}", file=sys.stderr)
        return 2
    families: dict[str, list[Path]] = {}
    for problem in problems:
        family = covered(problem)
        if family is not None:
            families.setdefault(family, []).append(problem)
    picked = round_robin(families)[: args.problems]
    base = args.list_file.resolve().parent
    lines = [f"# {len(picked)} of the {sum(map(len, families.values()))} covered problems "
             f"({len(problems)} in levels {' '.join(args.levels)}), round-robin over {len(families)} template families"]
    lines += [f"{os.path.relpath(p.resolve(), base)}  # {family}" for p, family in picked]
    args.list_file.parent.mkdir(parents=True, exist_ok=True)
    args.list_file.write_text("\n".join(lines) + "\n")
    print(lines[0].lstrip("# "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
