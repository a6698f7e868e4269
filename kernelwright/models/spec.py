"""MODEL_SPEC: where the user's model comes from.

A spec names a callable, `path/to/file.py:build` or `package.module:build`. Called with no
arguments it returns `(model, example_inputs)`; with a separate inputs spec (`--inputs`), the model
callable may return the model alone and the inputs callable returns the example inputs. Example
inputs are a tuple or list (positional arguments of `model.forward`), a dict (keyword arguments),
or a single tensor.

`load_callable` is stdlib only on purpose: its source is copied verbatim into every problem file
that `extract` writes (problem_file.py), so a problem rebuilds the user's model in the judge's
processes without importing kernelwright, and both sides resolve a spec the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


class ModelSpecError(ValueError):
    """A MODEL_SPEC that cannot be loaded or whose callable breaks the contract; the message says why."""


def load_callable(spec, search_path=()):
    """The callable a spec names: `file.py:name` (the file's folder put on sys.path first, the file
    imported once under a name made from its absolute path) or `package.module:name` (imported
    with `search_path` on sys.path: the folder extract ran in)."""
    import hashlib
    import importlib
    import importlib.util
    import os
    import sys

    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ValueError(f"model spec {spec!r} must look like path/to/file.py:build or package.module:build")
    if where.endswith(".py"):
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ValueError(f"model spec {spec!r}: no file {path}")
        key = "kw_user_model_" + hashlib.sha1(path.encode()).hexdigest()[:12]
        module = sys.modules.get(key)
        if module is None:
            folder = os.path.dirname(path)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            loader_spec = importlib.util.spec_from_file_location(key, path)
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[key] = module
            try:
                loader_spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[key]
                raise
    else:
        for folder in search_path:
            if folder not in sys.path:
                sys.path.append(folder)
        module = importlib.import_module(where)
    found = getattr(module, name, None)
    if not callable(found):
        raise ValueError(f"model spec {spec!r}: {where} has no callable named {name!r}")
    return found


@dataclass
class BuiltModel:
    """The user's model and its example inputs, as positional and keyword arguments."""

    model: Any
    args: tuple
    kwargs: dict


def absolute_spec(spec: str) -> str:
    """A file spec made absolute (the problem files are judged from other folders); a module spec as is."""
    where, _, name = spec.rpartition(":")
    return f"{Path(where).resolve()}:{name}" if where.endswith(".py") else spec


def _call(spec: str, what: str, search_path: tuple[str, ...]):
    try:
        fn = load_callable(spec, search_path)
    except ValueError as exc:
        raise ModelSpecError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 -- the user's module failed to import: say so, with its error
        raise ModelSpecError(f"importing {spec!r} failed: {type(exc).__name__}: {exc}") from exc
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 -- the user's callable failed: name it, keep its error
        raise ModelSpecError(f"calling {what} {spec!r} failed: {type(exc).__name__}: {exc}") from exc


def split_inputs(inputs: Any) -> tuple[tuple, dict]:
    """(args, kwargs) from example inputs: a tuple/list, a dict, or one value."""
    if isinstance(inputs, dict):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def build_model(spec: str, inputs_spec: str | None = None, search_path: tuple[str, ...] = ()) -> BuiltModel:
    """Call the spec (and the inputs spec) and check the contract."""
    result = _call(spec, "the model callable", search_path)
    if inputs_spec:
        model = result[0] if isinstance(result, tuple) else result
        inputs = _call(inputs_spec, "the inputs callable", search_path)
    elif isinstance(result, tuple) and len(result) == 2:
        model, inputs = result
    else:
        raise ModelSpecError(f"{spec!r} must return (model, example_inputs), or the model alone with --inputs SPEC; "
                             f"it returned {type(result).__name__}")
    if not isinstance(model, torch.nn.Module):
        raise ModelSpecError(f"{spec!r} returned a {type(model).__name__} as the model; expected a torch.nn.Module")
    args, kwargs = split_inputs(inputs)
    return BuiltModel(model, args, kwargs)
