"""What names a build in the build cache and marks it done: the content hash of a build's inputs
(sources, flags, arch list, toolchain), the hashed folder name, the marker written after a
successful build, the per-build lock, and why a miss missed. Shared by the in-process build cache
(`compile`) and the supervisor's trusted builder (`buildservice`)."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .toolchain import current_arch_list, toolchain

BUILD_MARKER = "kw_build.json"  # written after a successful build: its presence means "cached"
LOCK_FOLDER = ".locks"  # <cache>/torch_extensions/.locks/<hashed name>.lock
# arguments that change where or how loudly a build runs, not what it builds
NOT_HASHED = {"build_directory", "verbose", "keep_intermediates"}


@dataclass
class BuildRecord:
    name: str  # the name the candidate asked for
    hashed_name: str
    build_dir: str
    backend: str  # "cuda" (has CUDA sources) or "cpp"
    ok: bool = False
    cached: bool = False
    seconds: float = 0.0
    log: str = ""
    errors: list[str] = field(default_factory=list)
    arch: str = ""


def file_text(path: Any) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return f"<unreadable {path}>"


def build_payload(builder: str, arguments: dict[str, Any], arch: str | None = None,
                  tools: dict[str, str] | None = None) -> dict[str, Any]:
    """What decides the built binary: the builder's arguments (file sources by content), the arch
    list and the toolchain."""
    hashed = {k: v for k, v in arguments.items() if k not in NOT_HASHED}
    if builder == "load":
        sources = hashed.get("sources")
        sources = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources or [])
        hashed["sources"] = [[Path(s).name, file_text(s)] for s in sources]
    return {
        "builder": builder,
        "arguments": hashed,
        "arch": current_arch_list() if arch is None else arch,
        "toolchain": toolchain() if tools is None else tools,
    }


def content_digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=repr).encode()).hexdigest()


def build_hash(builder: str, arguments: dict[str, Any], arch: str | None = None,
               tools: dict[str, str] | None = None) -> str:
    """sha256 over the builder's arguments (file sources by content), the arch list and toolchain."""
    return content_digest(build_payload(builder, arguments, arch, tools))


def hashed_name(name: str, digest: str) -> str:
    return f"{name}_{digest[:16]}"


@contextlib.contextmanager
def locked(build_dir: Path) -> Iterator[None]:
    """Exclusive lock on one build (`<cache>/torch_extensions/.locks/<name>.lock`, outside the build
    folder, which the trusted builder publishes by renaming); also clears torch's own lock file
    left in the folder by a killed build."""
    locks = build_dir.parent / LOCK_FOLDER
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{build_dir.name}.lock", "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            stale = build_dir / "lock"  # torch's FileBaton: only our lock holder could own it
            if stale.exists():
                stale.unlink()
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def explain_miss(build_dir: Path, payload: dict[str, Any]) -> str:
    """Why a build of these sources was not found: another build of the *same* sources exists
    for a different arch list or toolchain (a miss the caller can fix); "" when none does."""
    sources = content_digest(payload["arguments"])
    stem = build_dir.name.rsplit("_", 1)[0]
    for sibling in sorted(build_dir.parent.glob(f"{stem}_*")):
        if sibling == build_dir:
            continue
        try:
            other = json.loads((sibling / BUILD_MARKER).read_text())
        except (OSError, ValueError):
            continue
        if other.get("sources") != sources:
            continue
        if other.get("arch") != payload["arch"]:
            return (f"build cache miss: {sibling.name} holds the same sources built for arch "
                    f"{other.get('arch')!r}; this process builds for {payload['arch']!r} (TORCH_CUDA_ARCH_LIST)")
        changed = sorted(k for k, v in payload["toolchain"].items() if (other.get("toolchain") or {}).get(k) != v)
        return (f"build cache miss: {sibling.name} holds the same sources built with another toolchain "
                f"({', '.join(changed) or 'unknown difference'})")
    return ""


def marker_matches(marker: Path, digest: str) -> bool:
    try:
        return json.loads(marker.read_text()).get("hash") == digest
    except (OSError, ValueError):
        return False
