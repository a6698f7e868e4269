"""The one config file, found and read the same way by every command.

Where: `--config PATH`, else `$KW_CONFIG`, else `./kernelwright.toml` when the working folder has
one. What: a TOML file with any of the tables `[llm]` (docs/providers.md), `[optimize]` (search
settings, budgets, `backend`, `eval`, `eval_workers`; docs/optimize.md) and `[judge]` (JudgeConfig
fields; docs/judge.md); flags win over the file. A file that holds none of these tables but LLM
settings at its top level is read as the `[llm]` table (the older, LLM-only format).

Stdlib only (any folder but judge/ may import it).
"""
from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Mapping

from . import envvars

DEFAULT_NAME = "kernelwright.toml"
TABLES = ("llm", "optimize", "judge")


class ConfigFileError(ValueError):
    """The file is missing, not TOML, or holds a table kernelwright does not know."""


def find(explicit: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path | None:
    """The config file in use: the explicit path, else $KW_CONFIG, else ./kernelwright.toml."""
    if explicit:
        return Path(explicit)
    from_env = envvars.get("KW_CONFIG", env)
    if from_env:
        return Path(from_env)
    local = Path(DEFAULT_NAME)
    return local if local.is_file() else None


def read(path: str | Path) -> dict[str, Any]:
    """{table name: dict} for the tables present (an LLM-only file becomes {"llm": ...})."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"config file {path} is not valid TOML: {exc}") from None
    if not any(name in data for name in TABLES):
        return {"llm": data} if data else {}
    unknown = sorted(set(data) - set(TABLES))
    if unknown:
        raise ConfigFileError(f"config file {path}: unknown table or key {', '.join(unknown)} "
                              f"(a kernelwright config holds [llm], [optimize] and [judge])")
    for name in TABLES:
        if name in data and not isinstance(data[name], dict):
            raise ConfigFileError(f"config file {path}: {name} must be a table ([{name}])")
    return {name: data[name] for name in TABLES if name in data}


def load(explicit: str | Path | None = None, env: Mapping[str, str] | None = None) -> tuple[Path | None, dict]:
    """(the file found, its tables); (None, {}) when there is none."""
    path = find(explicit, env)
    return (path, read(path)) if path is not None else (None, {})
