"""The trusted builder: C++/CUDA extensions of confined candidates, built by a process that runs no
candidate Python and published in the shared build cache only under a hash the supervisor computes.

A candidate's process cannot write the build cache. Its `load_inline` / `load` (patched by
`compile.install_build_cache`) hashes the build and loads the prebuilt library when the cache holds
it (reading is allowed). On a miss it sends the builder's arguments, as JSON data, to its
supervisor (`build_remotely` -> `service.call("build")`), and the supervisor (`serve_build`):

1. copies the inputs into a fresh staging folder inside the cache (file sources of `load` by
   content, so a later change of the candidate's file cannot slip in), and hashes *that copy*,
   the flags, the arch list asked for and its own toolchain;
2. takes the build's lock; if another process published that hash meanwhile, answers with it;
3. runs `python -m kernelwright.judge.builder` in the staging folder: a new process that confines
   itself (writable only the staging folder) and runs torch's builder (ninja, nvcc, the C++
   compiler) on exactly those inputs;
4. publishes the staging folder under the hashed name by one rename, with the marker.

Why this is sound: what is published under hash H was built from exactly the inputs that hash to H
(copied before they were hashed; nothing but the confined builder can write the staging folder
before the rename). A candidate controls only the inputs -- compiler flags such as `-ccbin`
included -- and whatever they make lands under the hash of those inputs, which no other candidate
asks for unless it sends the same bytes. Paths named in the inputs (an include folder) are not
hashed by content; a candidate can write only its own scratch folder, which no other candidate's
inputs name. The rejected alternative -- build in the candidate's process or scratch and copy the
result in under a recomputed hash -- would publish whatever binary the candidate left there under
the hash of inputs it merely claims.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any, Callable

from . import service
from .buildcache import (BUILD_MARKER, NOT_HASHED, BuildRecord, build_payload, content_digest, explain_miss,
                         hashed_name, locked, marker_matches)
from .buildlog import LOG_FILE, renames, tail, trim_errors
from .confine import SCRATCH_PREFIX
from .toolchain import toolchain

BUILDERS = ("load_inline", "load")
STAGING = ".staging"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,100}$")
_ARCH = re.compile(r"^[A-Za-z0-9.;+ _-]{0,200}$")


# ---------------------------------------------------------------- the candidate's side


def build_remotely(builder: str, arguments: dict[str, Any], arch: str, record: BuildRecord):
    """Ask the supervisor to build (or find) this extension, then load it from the shared cache."""
    sent = {k: _plain(v) for k, v in arguments.items() if k not in NOT_HASHED}
    if builder == "load":
        sources = sent.get("sources")
        sources = [sources] if isinstance(sources, str) else list(sources or [])
        sent["sources"] = [str(Path(s).resolve()) for s in sources]
    started = time.perf_counter()
    try:
        reply = service.call("build", builder=builder, arguments=sent, arch=arch)
    except service.ServiceError as exc:
        reply = {"ok": False, "log": str(exc), "name": record.hashed_name, "dir": ""}
    record.seconds = time.perf_counter() - started
    record.hashed_name, record.build_dir = reply.get("name", record.hashed_name), reply.get("dir", "")
    record.cached, record.log = bool(reply.get("cached")), tail(str(reply.get("log", "")))
    if not reply.get("ok"):
        record.errors = trim_errors(str(reply.get("log", "")), rename=renames(builder, arguments))
        raise RuntimeError(f"Error building extension '{arguments['name']}' (the judge's builder): "
                           f"{(record.errors or [record.log[-500:]])[0]}")
    record.ok = True
    return load_built(record.hashed_name, record.build_dir, arguments)


def load_built(name: str, folder: str, arguments: dict[str, Any]):
    import torch.utils.cpp_extension as cpp  # noqa: PLC0415 -- torch.utils.cpp_extension takes 0.5 s to import (setuptools): loaded only when an extension is built

    if arguments.get("is_standalone"):
        return cpp._get_exec_path(name, folder)
    return cpp._import_module_from_library(name, folder, arguments.get("is_python_module", True))


def _plain(value: Any) -> Any:
    """JSON-able form of a builder argument (paths as strings)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    raise TypeError(f"a {type(value).__name__} cannot be sent to the judge's builder")


# ---------------------------------------------------------------- the supervisor's side


def serve_build(message: dict[str, Any], cache_dir: Path, timeout_s: float, readable: Path | None = None,
                on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Answer one build request (see the module docstring); never trusts a field of `message`."""
    builder, arguments, arch = _validated(message)
    root = Path(cache_dir) / "torch_extensions"
    staging = root / STAGING / f"{arguments['name']}-{secrets.token_hex(6)}"
    staging.mkdir(parents=True)
    try:
        _stage_sources(builder, arguments, staging, readable)
        payload = build_payload(builder, arguments, arch=arch, tools=toolchain())
        digest = content_digest(payload)
        name = hashed_name(arguments["name"], digest)
        final = root / name
        with locked(final):
            if marker_matches(final / BUILD_MARKER, digest):
                return {"ok": True, "cached": True, "name": name, "dir": str(final), "arch": arch,
                        "log": "loaded the prebuilt extension (cache hit)"}
            why = explain_miss(final, payload)
            arguments.update(name=name, build_directory=str(staging), verbose=True)
            ok, log, seconds = _run_builder(builder, arguments, arch, staging, timeout_s, readable, on_start)
            if not ok:
                return {"ok": False, "cached": False, "name": name, "dir": "", "arch": arch, "log": log,
                        "seconds": seconds}
            _publish(staging, final, {"hash": digest, "name": name, "seconds": seconds,
                                      "sources": content_digest(payload["arguments"]), "arch": arch,
                                      "toolchain": payload["toolchain"], "built_by": "kernelwright.judge.builder"})
        return {"ok": True, "cached": False, "name": name, "dir": str(final), "arch": arch, "seconds": seconds,
                "log": tail(log) + (f"\n{why}" if why else "")}
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _validated(message: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    builder = message.get("builder")
    arguments = message.get("arguments")
    arch = str(message.get("arch") or "none")
    if builder not in BUILDERS or not isinstance(arguments, dict):
        raise ValueError(f"not a build request: builder {builder!r}")
    if not isinstance(arguments.get("name"), str) or not _NAME.match(arguments["name"]):
        raise ValueError(f"an extension name must be a Python identifier, not {arguments.get('name')!r}")
    if not _ARCH.match(arch):
        raise ValueError(f"not a CUDA arch list: {arch!r}")
    return builder, {k: v for k, v in arguments.items() if k not in NOT_HASHED}, arch


def _stage_sources(builder: str, arguments: dict[str, Any], staging: Path, readable: Path | None) -> None:
    """`load` names files: copy each (once, by content) into the staging folder and build those.
    This process reads them for the candidate, so only what the candidate could read itself:
    regular files of a bounded size, none in another candidate's scratch folder."""
    if builder != "load":
        return
    sources = arguments.get("sources")
    sources = [sources] if isinstance(sources, str) else list(sources or [])
    staged = []
    for index, source in enumerate(sources):
        path = _readable_source(Path(str(source)), readable)
        folder = staging / "sources" / str(index)
        folder.mkdir(parents=True)
        target = folder / path.name
        target.write_bytes(path.read_bytes())
        staged.append(str(target))
    arguments["sources"] = staged


MAX_SOURCE_BYTES = 16 << 20


def _readable_source(path: Path, readable: Path | None) -> Path:
    real = path.resolve()
    if not real.is_file() or real.stat().st_size > MAX_SOURCE_BYTES:
        raise ValueError(f"{path}: not a regular source file of at most {MAX_SOURCE_BYTES >> 20} MB")
    if readable is not None:
        own = Path(readable).resolve()
        private_root = own.parent
        if private_root in real.parents and own not in real.parents:
            inside = real.relative_to(private_root).parts[0]
            if inside.startswith(SCRATCH_PREFIX):
                raise ValueError(f"{path}: in another candidate's scratch folder")
    return real


def _run_builder(builder: str, arguments: dict[str, Any], arch: str, staging: Path, timeout_s: float,
                 readable: Path | None, on_start) -> tuple[bool, str, float]:
    """(built, log, seconds) of one confined builder process."""
    request = {"builder": builder, "arguments": arguments, "readable": str(readable) if readable else ""}
    (staging / "request.json").write_text(json.dumps(request))
    env = dict(os.environ, TMPDIR=str(staging / ".tmp"), HOME=str(staging / ".home"), CUDA_VISIBLE_DEVICES="")
    for folder in (".tmp", ".home"):
        (staging / folder).mkdir()
    if arch and arch != "none":
        env["TORCH_CUDA_ARCH_LIST"] = arch
    else:
        env.pop("TORCH_CUDA_ARCH_LIST", None)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kernelwright.judge.builder", str(staging / "request.json")],
                            cwd=staging, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if on_start is not None:
        on_start(proc.pid)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        output += f"\nthe build took longer than {timeout_s:g} s and was stopped".encode()
    seconds = time.perf_counter() - started
    log = _read(staging / LOG_FILE) or output.decode(errors="replace")
    built = proc.returncode == 0 and _artifact(arguments, staging).is_file()
    return built, log, seconds


def _artifact(arguments: dict[str, Any], staging: Path) -> Path:
    if arguments.get("is_standalone"):
        return staging / (arguments["name"] + (sysconfig.get_config_var("EXE") or ""))
    return staging / f"{arguments['name']}.so"


def _publish(staging: Path, final: Path, details: dict[str, Any]) -> None:
    """Marker first, then one rename: a reader sees no folder, or a complete one."""
    for scratch in (".tmp", ".home", "request.json"):
        target = staging / scratch
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    (staging / BUILD_MARKER).write_text(json.dumps(details))
    if final.exists():  # an unfinished build of an older judge, or one whose marker no longer matches
        shutil.rmtree(final)
    os.rename(staging, final)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
