"""Correct candidates for shared KernelBench level-1 problems without an LLM, picked by a rule.

Shared by bench/four_runners.py and bench/cli_sequence.py. The candidates are instances of the
built-in template library (kernelwright/tune/library): its default instance of a problem, then
other feasible configurations of the same template (other block sizes, warps, stages), spread
over the feasible list. No problem is named; two rules pick them:

- `largest`: by the bytes of the inputs `get_inputs()` makes at full KernelBench size, computed on
  the meta device (nothing is allocated), largest first, skipping problems the library does not
  cover;
- `families`: in sorted file order, the first covered problem of each template family not seen yet
  (pointwise, rowwise, gemm_epilogue, pool, conv, ...), so a few problems cover different kernels.

`python bench/template_candidates.py MANIFEST.json --rule R --problems N --instances K,K,.. [--device cpu]`
writes the manifest (problems, sizes, candidate files beside it); the benches run it in a child
process so that a GPU bench's own process never creates a CUDA context (the template library
reads the device's limits through torch). On the CPU (`--device cpu`) every problem gets the
sizes the judge shrinks it to there (problem/shrink.py), passed on as explicit overrides.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from evidence_common import kernelbench_root  # noqa: E402


def input_bytes(path: Path) -> int | None:
    """Bytes of the tensors `get_inputs()` returns at the problem's own sizes, made on meta; None
    when the problem cannot make them there."""
    import torch

    from kernelwright.problem import load_problem
    from kernelwright.problem.footprint import tensor_bytes

    try:
        problem = load_problem(path)
        with torch.device("meta"):
            torch.manual_seed(0)
            return tensor_bytes(list(problem.module.get_inputs()))
    except Exception:  # noqa: BLE001 -- a problem meta cannot build inputs for is left out of the ranking
        return None


def judged_sizes(path: Path, device: str) -> dict:
    """The overrides the problem is judged at: none on a GPU (full size), the judge's own shrunk
    sizes on the CPU."""
    if device != "cpu":
        return {}
    from kernelwright.problem import load_problem

    return dict(load_problem(path, shrink=True).overrides)


def match(path: Path, overrides: dict, limits):
    """The library's template for the problem at these sizes, or None."""
    from kernelwright.problem import load_problem
    from kernelwright.tune.library import NoTemplate, build_template

    try:
        return build_template(load_problem(path, overrides), limits=limits)
    except NoTemplate:
        return None
    except Exception:  # noqa: BLE001 -- a problem the library trips over is not covered
        return None


def instances(template, count: int, limits) -> list[tuple[dict, str]]:
    """(params, source) of `count` instances: the default, then feasible configurations spread over
    the feasible list (fewer when the space has fewer)."""
    from kernelwright.tune.prune import prune_space

    chosen = [template.complete({})]
    try:
        feasible = [p for p in prune_space(template, limits).feasible if template.complete(p) != chosen[0]]
    except Exception:  # noqa: BLE001 -- a space too large to enumerate: the default only
        feasible = []
    if feasible and count > 1:
        step = max(1, len(feasible) // (count - 1))
        chosen += [template.complete(p) for p in feasible[::step][: count - 1]]
    return [(params, template.instantiate(params)) for params in chosen]


def pick(rule: str, problems: int, device: str, limits) -> list[dict]:
    """[{path, overrides, input_bytes, family, template}] for `problems` covered problems."""
    paths = sorted(p for p in (kernelbench_root() / "level1").glob("*.py") if not p.name.startswith("_"))
    if rule == "largest":
        sized = [(input_bytes(p), p) for p in paths]
        paths = [p for size, p in sorted(((s, p) for s, p in sized if s), key=lambda sp: (-sp[0], sp[1].name))]
    picked, families = [], set()
    for path in paths:
        overrides = judged_sizes(path, device)
        found = match(path, overrides, limits)
        if found is None:
            continue
        family = "+".join(found.families)
        if rule == "families" and family in families:
            continue
        families.add(family)
        picked.append({"path": str(path), "overrides": overrides, "input_bytes": input_bytes(path),
                       "family": family, "template": found.template})
        if len(picked) == problems:
            break
    return picked


def write_manifest(manifest: Path, rule: str, counts: list[int], device: str) -> dict:
    """Pick len(counts) problems, write counts[i] candidates of problem i beside the manifest."""
    from kernelwright.tune.hardware import detect_limits

    limits = detect_limits()
    folder = manifest.parent / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    problems = []
    for item, count in zip(pick(rule, len(counts), device, limits), counts, strict=False):
        stem = Path(item["path"]).stem
        files = []
        for index, (params, source) in enumerate(instances(item.pop("template"), count, limits)):
            path = folder / f"{stem}__i{index}.py"
            path.write_text(source)
            files.append({"path": str(path), "params": params, "default": index == 0})
        problems.append({**item, "candidates": files})
    data = {"rule": rule, "device": device, "limits": limits.name, "problems": problems}
    manifest.write_text(json.dumps(data, indent=1, default=str))
    return data


def prepare(manifest: Path, rule: str, counts: list[int], device: str) -> dict:
    """`write_manifest` in a child process (its CUDA context ends with it); the manifest's data."""
    command = [sys.executable, __file__, str(manifest), "--rule", rule, "--instances", ",".join(map(str, counts)),
               "--device", device]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"picking problems failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(manifest.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--rule", choices=("largest", "families"), required=True)
    parser.add_argument("--instances", required=True, help="candidates per problem, comma-separated (one per problem)")
    parser.add_argument("--device", default="cuda", help="cuda (full sizes) or cpu (the judge's CPU sizes)")
    args = parser.parse_args()
    counts = [int(c) for c in args.instances.split(",") if c.strip()]
    data = write_manifest(args.manifest, args.rule, counts, args.device)
    for item in data["problems"]:
        print(f"{Path(item['path']).stem}: {item['family']}, inputs {item['input_bytes']} B, "
              f"{len(item['candidates'])} candidates, overrides {item['overrides']}")
    if len(data["problems"]) < len(counts):
        print(f"only {len(data['problems'])} covered problems found, {len(counts)} asked", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
