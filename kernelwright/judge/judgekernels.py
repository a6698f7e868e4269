"""The judge's own Triton kernels (`gpucompare`), compiled once per machine instead of once per
evaluation: 0.8 s of compiling (the kernel and Triton's launcher) in every worker otherwise.

Each worker has a Triton cache folder of its own (a candidate must not write what another one
loads). In stage 1, before any candidate code exists in the process, the worker asks its
supervisor for the shared folder (`judge_kernels`), copies its entries into its own cache (`seed`,
which points Triton's group files at the copies), compiles the judge's kernels (`gpucompare.warm`:
hits then) and offers the entries that compiling
added (`store_judge_kernels`). The supervisor, a trusted process, copies them into the shared
folder (`publish`): once per evaluation and only before the seal, like the reference store, so
nothing a process wrote after running candidate code reaches another evaluation. After the seal
the worker compiles no judge kernel (`gpucompare.applies`).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import uuid
from pathlib import Path

from kernelwright.files import outside_folders

FOLDER = Path("judge_kernels") / "triton"  # under the judge's cache folder
MAX_BYTES = 64 << 20  # what one evaluation may add; the whole folder is cleared above 8x that


def shared_folder(cache: Path) -> Path:
    return cache / FOLDER


def entries(folder: Path) -> set[str]:
    """Names of the cache entries (Triton's hash folders) in `folder`."""
    try:
        return {p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")}
    except OSError:
        return set()


def seed(shared: Path, own: Path) -> set[str]:
    """Copy the shared entries missing from `own` into it; the entries `own` then holds."""
    own.mkdir(parents=True, exist_ok=True)
    present = entries(own)
    for name in sorted(entries(shared) - present):
        try:
            shutil.copytree(shared / name, own / name, symlinks=False)
            _repoint_groups(own / name)
            present.add(name)
        except (OSError, ValueError):  # evicted meanwhile, or unreadable: compiled again
            shutil.rmtree(own / name, ignore_errors=True)
    return present


def _repoint_groups(entry: Path) -> None:
    """Point the entry's group files at its own files. Triton records a kernel's files in
    `__grp__<name>.json` by absolute path, in the cache folder that compiled it (another
    evaluation's, gone by now), and counts a group whose files are missing as a miss: without
    this every worker compiled the kernel again (0.3-0.5 s a CLI call on the H100)."""
    for group in entry.glob("__grp__*.json"):
        data = json.loads(group.read_text())
        children = data.get("child_paths")
        if isinstance(children, dict):
            data["child_paths"] = {child: str(entry / Path(path).name) for child, path in children.items()}
            group.write_text(json.dumps(data))


def publish(cache: Path, own: Path, names: list[str], allowed: list[Path]) -> dict:
    """Copy the worker's new entries `names` of its cache folder `own` (inside `allowed`, its own
    folders) into the shared folder, each atomically (a temporary folder renamed)."""
    if outside_folders(own, allowed):
        return {"error": f"{own} is not the evaluation's own cache folder"}
    source = Path(os.path.abspath(own))
    chosen = [n for n in names if n and "/" not in n and not n.startswith(".") and (source / n).is_dir()]
    if sum(_plain_bytes(source / n) for n in chosen) > MAX_BYTES:
        return {"error": f"more than {MAX_BYTES >> 20} MiB of kernels offered"}
    shared = shared_folder(cache)
    shared.mkdir(parents=True, exist_ok=True)
    if sum(_plain_bytes(shared / n) for n in entries(shared)) > 8 * MAX_BYTES:
        shutil.rmtree(shared, ignore_errors=True)  # kernels of old versions: compiled again when needed
        shared.mkdir(parents=True, exist_ok=True)
    stored = []
    for name in chosen:
        if (shared / name).exists():
            continue
        tmp = shared / f".tmp-{uuid.uuid4().hex}"
        try:
            _copy_plain(source / name, tmp)
            os.rename(tmp, shared / name)
            stored.append(name)
        except OSError:  # another evaluation stored it first
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"ok": True, "stored": stored}


def _plain_bytes(folder: Path) -> int:
    try:
        return sum(p.lstat().st_size for p in folder.iterdir())
    except OSError:
        return 0


def _copy_plain(source: Path, target: Path) -> None:
    """Copy the plain files directly in `source` (no links, no sub-folders) into the new `target`."""
    target.mkdir()
    for path in source.iterdir():
        if stat.S_ISREG(path.lstat().st_mode):
            shutil.copyfile(path, target / path.name, follow_symlinks=False)
