"""The Jinja environment of the prompts: user folders first, the built-in folder last, read into
memory when the environment is made (an agent is built).

A user folder overrides a built-in template by file name (e.g. a `planner.md.j2` of your own),
everything it does not define falls through to the built-ins. StrictUndefined makes a misspelt
variable in a custom template an error at render time instead of a silently empty prompt.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import jinja2

BUILTIN_PROMPTS = Path(__file__).resolve().parent / "prompts"


class PromptTemplateError(ValueError):
    """A prompt folder or template is unusable; the message names the folder or file."""


def prompt_search_path(prompt_dirs: Iterable[Path | str] | None) -> list[Path]:
    """The folders to search, in order, always ending with the built-ins."""
    folders = [Path(d).expanduser() for d in (prompt_dirs or [])]
    for folder in folders:
        if not folder.is_dir():
            raise PromptTemplateError(f"prompt folder {folder} does not exist or is not a folder")
    resolved = [f.resolve() for f in folders]
    if BUILTIN_PROMPTS not in resolved:
        folders.append(BUILTIN_PROMPTS)
    return folders


class SnapshotLoader(jinja2.BaseLoader):
    """Every file of the prompt folders, read once when the agent is built (a user folder's file
    shadows a built-in one of the same name): rendering never touches the disk, so a prompt file
    edited during a run cannot change what the engine asks."""

    def __init__(self, folders: list[Path]):
        self.searchpath = [str(f) for f in folders]
        self.files: dict[str, tuple[str, str]] = {}  # name -> (text, path)
        for folder in folders:
            for path in sorted(folder.rglob("*")):
                name = path.relative_to(folder).as_posix()
                if name in self.files or not path.is_file() or "__pycache__" in path.parts:
                    continue
                try:
                    self.files[name] = (path.read_text(encoding="utf-8"), str(path))
                except (OSError, UnicodeDecodeError) as exc:
                    raise PromptTemplateError(f"prompt file {path} cannot be read: {exc}") from None

    def get_source(self, environment: jinja2.Environment, template: str):
        if template not in self.files:
            raise jinja2.TemplateNotFound(template)
        text, path = self.files[template]
        return text, path, lambda: True

    def list_templates(self) -> list[str]:
        return sorted(self.files)


def make_environment(prompt_dirs: Iterable[Path | str] | None = None) -> jinja2.Environment:
    return jinja2.Environment(
        loader=SnapshotLoader(prompt_search_path(prompt_dirs)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )


def load_template(env: jinja2.Environment, name: str) -> jinja2.Template:
    """Compile a template now, so a broken custom prompt fails when the agent is built."""
    try:
        return env.get_template(name)
    except jinja2.TemplateNotFound as exc:
        raise PromptTemplateError(f"prompt template {exc.name!r} not found in {_where(env)}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise PromptTemplateError(
            f"prompt template {exc.filename or exc.name}, line {exc.lineno}: {exc.message}") from None


def raw_source(env: jinja2.Environment, name: str) -> str:
    """A file's text as is (worked examples hold code with braces Jinja must not interpret)."""
    try:
        source, _, _ = env.loader.get_source(env, name)
    except jinja2.TemplateNotFound:
        raise PromptTemplateError(f"prompt file {name!r} not found in {_where(env)}") from None
    return source


def render(env: jinja2.Environment, template_name: str, /, **variables) -> str:
    template = load_template(env, template_name)
    try:
        return template.render(**variables)
    except jinja2.UndefinedError as exc:
        raise PromptTemplateError(f"prompt template {template_name}: {exc.message}") from None


def _where(env: jinja2.Environment) -> str:
    paths = getattr(env.loader, "searchpath", [])
    return ", ".join(paths) or "the configured prompt folders"
