"""A suite: many problems optimized as one job, in one folder with a manifest.

    SUITE_DIR/
      suite.json        the manifest: id, how it was started, one entry per problem (its run folder)
      <run name>/       one run folder per problem (run.sqlite, candidates, best_model_new.py)
      evals/            --eval batch: the ONE folder of requests of every run (names start with the run)
      exchange/         --llm exchange: the ONE folder of prompts of every run

`kernelwright optimize --resume SUITE_DIR` continues every run, `kernelwright report SUITE_DIR`
reports them together, `kernelwright runs list --dir SUITE_DIR` lists them. Run folders are named
after their problem (the problem's folder is added when two problems share a file name); the entry
keeps the problem's level (the name of the folder it came from, e.g. `level1`).

`find_runs(path)` is how readers (the report, the KernelBench export) find runs: a suite folder
(in manifest order), a run folder, or a workspace (every run folder below it, suites included).
"""
from __future__ import annotations

import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelwright import __version__
from kernelwright.files import atomic_write

MANIFEST = "suite.json"
SCHEMA = 1
BATCH_DIR, EXCHANGE_DIR = "evals", "exchange"


class SuiteError(ValueError):
    """A suite folder that cannot be read (or made); the message says why."""


@dataclass
class SuiteEntry:
    name: str  # run folder name, unique in the suite
    problem: str  # the problem file (absolute)
    level: str  # the problem's folder name (`level1`), for per-level tables
    error: str = ""  # why its run could not be created (a broken problem file): reported as failed

    @property
    def request_prefix(self) -> str:
        """Starts the name of each of this run's requests in the suite's batch folder."""
        return f"{self.name}--"


@dataclass
class SuiteManifest:
    id: str
    created: str
    mode: str  # "search" (agents), "autotune" (no LLM) or "import" (candidates from elsewhere)
    eval: str = "local"
    kernelwright: str = ""  # the version that made the suite
    entries: list[SuiteEntry] = field(default_factory=list)
    note: str = ""  # e.g. where imported candidates came from
    schema: int = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SuiteManifest":
        entries = [SuiteEntry(**{k: v for k, v in e.items() if k in SuiteEntry.__dataclass_fields__})
                   for e in data.get("entries") or []]
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "entries"}
        return cls(**known, entries=entries)

    def entry(self, name: str) -> SuiteEntry | None:
        return next((e for e in self.entries if e.name == name), None)


def is_suite(folder: str | Path) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def new_suite_id(label: str) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", label)[:40] or "suite"
    return f"{stamp}-suite-{safe}-{secrets.token_hex(2)}"


def entries_for(problems: list[Path]) -> list[SuiteEntry]:
    """One entry per problem file: run folders named after the file, with its folder when two
    problems share a file name; the level is the folder's name."""
    stems: dict[str, int] = {}
    for path in problems:
        stems[path.stem] = stems.get(path.stem, 0) + 1
    out, seen = [], set()
    for path in problems:
        level = path.resolve().parent.name
        name = _safe(path.stem if stems[path.stem] == 1 else f"{level}-{path.stem}")
        while name in seen or name in (BATCH_DIR, EXCHANGE_DIR):
            name += "_"
        seen.add(name)
        out.append(SuiteEntry(name=name, problem=str(path.resolve()), level=level))
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80]


def write_manifest(folder: str | Path, manifest: SuiteManifest) -> Path:
    """Write SUITE_DIR/suite.json atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / MANIFEST
    atomic_write(path, json.dumps(manifest.to_dict(), indent=1) + "\n")
    return path


def read_manifest(folder: str | Path) -> SuiteManifest:
    path = Path(folder) / MANIFEST
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SuiteError(f"{path}: not a readable suite manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("schema", 0) > SCHEMA:
        raise SuiteError(f"{path}: written by a newer kernelwright (schema {data.get('schema')}); upgrade to read it")
    return SuiteManifest.from_dict(data)


def new_manifest(mode: str, eval_mode: str, problems: list[Path], label: str, note: str = "") -> SuiteManifest:
    return SuiteManifest(id=new_suite_id(label), created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         mode=mode, eval=eval_mode, kernelwright=__version__, entries=entries_for(problems),
                         note=note)


@dataclass
class FoundRun:
    """A run folder a reader found, with its suite entry when it belongs to a suite."""

    run_dir: Path
    entry: SuiteEntry | None = None


def find_runs(path: str | Path) -> tuple[list[FoundRun], SuiteManifest | None]:
    """(runs, manifest) for a suite folder, a run folder (or its run.sqlite), or a workspace."""
    path = Path(path)
    if path.is_file() and path.name == "run.sqlite":
        path = path.parent
    if is_suite(path):
        manifest = read_manifest(path)
        return [FoundRun(path / e.name, e) for e in manifest.entries], manifest
    if (path / "run.sqlite").is_file():
        return [FoundRun(path)], None
    if not path.is_dir():
        raise SuiteError(f"{path}: no such folder")
    found: list[FoundRun] = []
    for child in sorted(p for p in path.iterdir() if p.is_dir()):
        if is_suite(child):
            runs, _ = find_runs(child)
            found += runs
        elif (child / "run.sqlite").is_file():
            found.append(FoundRun(child))
    if not found:
        raise SuiteError(f"{path} holds no run, suite or workspace of runs")
    return found, None
