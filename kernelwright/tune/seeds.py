"""Where a tuning starts: the best configurations measured earlier for the same template family,
device and shape (issue 33, point 3).

A search that starts blind spends its first evaluations rediscovering what an earlier tuning of
the same template already measured (the same problem again, a resumed run, the next problem of a
suite whose op is the same at other sizes). `SeedCache` keeps, per template family and device,
the fastest configurations each shape measured; `tune()` measures the best ones of the same
shape, or of the nearest shape of the family, first (after its `first` configurations), and
records what it measured after each batch.

- **Family**: a digest of the template's declaration (`KW_TUNE` as written: name, backend,
  parameters, constraints), less what varies with the shape (`sizes`, `defaults`, the problem's
  name). A library template at other sizes is the same family; `Template.restrict` does not
  change it (it reads the source, which restricting keeps).
- **Shape**: the template's declared `sizes`. Nearest: the same size names, the least sum of
  |log2 a - log2 b| over them; shapes with other names are not neighbours.
- **Device**: the evaluator's device name; another device's times say nothing here.

Seeds only order what is measured first: each is measured again (the measurement cache answers
when nothing changed), so a stale or foreign seed costs one evaluation, never a wrong result.
One JSON file per family under `<tune cache>/seeds/`; a file that cannot be read or parsed is
ignored with a warning (and replaced at the next write), never a crash.
"""
from __future__ import annotations

import ast
import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Iterable

from kernelwright.files import atomic_write, locked_beside

from .cache import default_cache_dir, digest
from .template import TUNE_NAME, Template, config_key

log = logging.getLogger("kernelwright.tune")

VERSION = 1
KEPT = 32  # configurations kept per (device, shape): the fastest
_SHAPE_FREE = ("sizes", "defaults")  # declaration keys that vary with the shape, left out of the family
_META_FREE = ("problem", "dynamic_shapes")


def family(template: Template) -> str:
    """The template's family: its declaration without what varies with the shape."""
    try:
        node = next(n for n in ast.parse(template.source).body
                    if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == TUNE_NAME)
        decl = dict(ast.literal_eval(node.value))
    except (StopIteration, SyntaxError, ValueError, TypeError):  # parse_template read it: not expected
        decl = {"params": {k: list(v) for k, v in template.params.items()},
                "constraints": [c.text for c in template.constraints]}
    decl = {k: v for k, v in decl.items() if k not in _SHAPE_FREE}
    if isinstance(decl.get("meta"), dict):
        decl["meta"] = {k: v for k, v in decl["meta"].items() if k not in _META_FREE}
    return digest({"decl": decl, "backend": template.backend})


def shape_of(template: Template) -> dict[str, Any]:
    return {k: v for k, v in template.sizes.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def shape_distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    """0 for the same shape; the log2 distance over the sizes; inf when the names differ."""
    if set(a) != set(b):
        return math.inf
    return sum(abs(math.log2(max(a[k], 1e-9)) - math.log2(max(b[k], 1e-9))) if a[k] > 0 and b[k] > 0
               else (0.0 if a[k] == b[k] else 1.0) for k in a)


class SeedCache:
    """Measured configurations per (template family, device, shape), in JSON files beside the
    measurement cache."""

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder else default_cache_dir() / "seeds"

    def path(self, template: Template) -> Path:
        return self.folder / f"{family(template)}.json"

    def lookup(self, template: Template, device: str, limit: int = 4) -> list[dict[str, Any]]:
        """The fastest configurations (best first, at most `limit`) measured for `template` on
        `device` at its shape, or at the nearest shape of its family; [] when none."""
        shape = shape_of(template)
        records = [r for r in self._read(self.path(template)) if r.get("device") == device]
        ranked = sorted(records, key=lambda r: shape_distance(shape, r.get("shape") or {}))
        if not ranked or math.isinf(shape_distance(shape, ranked[0].get("shape") or {})):
            return []
        return [dict(c["params"]) for c in ranked[0]["configs"][:limit]]

    def record(self, template: Template, device: str, measurements: Iterable[Any]) -> None:
        """Merge measurements (tune.evaluate.Measurement) into this shape's record: a timed one
        keeps its fastest time (a full judgement outranks a sweep time), a failed one leaves the
        record; never raises for the file."""
        rows = [(dict(m.params), m.value, m.ok) for m in measurements]
        if not rows:
            return
        path, shape = self.path(template), shape_of(template)
        try:
            with locked_beside(path):
                records = self._read(path)
                mine = next((r for r in records if r.get("device") == device and r.get("shape") == shape), None)
                if mine is None:
                    mine = {"device": device, "shape": shape, "configs": []}
                    records.append(mine)
                _merge(mine, rows)
                atomic_write(path, json.dumps({"version": VERSION, "template": template.name, "records": records},
                                              default=str, indent=1))
        except OSError as exc:
            log.warning("could not write the tuning seeds %s: %s (tuning goes on without them)", path, exc)

    def _read(self, path: Path) -> list[dict[str, Any]]:
        if not path.exists():
            return []
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            records = data["records"] if isinstance(data, dict) and data.get("version") == VERSION else None
            if not isinstance(records, list) or not all(_valid(r) for r in records):
                raise ValueError("not a seeds file of this version")
            return records
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the unreadable tuning seeds %s (%s): this tuning starts without them", path, exc)
            return []


def _merge(record: dict[str, Any], rows: list[tuple[dict[str, Any], float | None, bool]]) -> None:
    """Fully judged configurations first (their times compare), then swept ones by sweep time (one
    repeat: a sweep's winner judged in full may read slower than its rivals' sweep times)."""
    kept = {config_key(c["params"]): c for c in record["configs"]}
    for params, value, judged in rows:
        key = config_key(params)
        old = kept.get(key)
        if value is None:  # measured and failed (here, now): no longer a seed
            kept.pop(key, None)
        elif old is None or (judged, -value) > (bool(old.get("judged")), -old["time_ms"]):
            kept[key] = {"params": params, "time_ms": value, "judged": judged, "at": round(time.time())}
    record["configs"] = sorted(kept.values(), key=lambda c: (not c.get("judged"), c["time_ms"]))[:KEPT]


def _valid(record: Any) -> bool:
    return (isinstance(record, dict) and isinstance(record.get("device"), str)
            and isinstance(record.get("shape"), dict) and isinstance(record.get("configs"), list)
            and all(isinstance(c, dict) and isinstance(c.get("params"), dict)
                    and isinstance(c.get("time_ms"), (int, float)) for c in record["configs"]))
