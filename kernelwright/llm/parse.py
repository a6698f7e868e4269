"""Pull code and JSON out of model answers without ever raising.

Models wrap code in fences with assorted tags, write several blocks (a sketch, then the final
module), get cut off mid-block, or skip the fences entirely. A failure comes back as
`ParseResult(ok=False, error=...)` whose message is written so it can be fed back to the model.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

#: Fence tags accepted for each requested language ("" - an untagged fence - is always accepted).
LANG_TAGS = {
    "python": {"python", "py", "python3", "py3", "triton"},
    "cuda": {"cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c", "hip"},
    "json": {"json", "jsonc", "json5"},
}
LANG_TAGS["triton"] = LANG_TAGS["python"]
LANG_TAGS["cpp"] = LANG_TAGS["cuda"]

_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$")
_DEFINES_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_CODE_START = re.compile(r"^(import |from \S+ import |class |def |@|#!|#include|__global__)", re.M)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_MAX_JSON_STARTS = 200  # bound on brace positions tried, so a huge answer stays fast


@dataclass(frozen=True)
class ParseResult:
    """`value` is the extracted object when ok; on a failure it may still hold the best guess
    (e.g. code with a syntax error) so the caller can quote it back."""

    ok: bool
    value: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Fence:
    tag: str  # first word of the info string, lower-cased ("" when untagged)
    body: str
    closed: bool
    line: int  # 1-based line of the opening fence


def find_fences(text: str) -> list[Fence]:
    """Fenced blocks in CommonMark style (``` or ~~~, closed by a fence at least as long);
    a block still open at the end of the text is returned with closed=False."""
    fences, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        marker, start = match["fence"], i
        closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        body = lines[start + 1: end if end is not None else len(lines)]
        tag = (match["info"].split() or [""])[0].lower().strip("{}.")
        fences.append(Fence(tag, "\n".join(body), end is not None, start + 1))
        i = (end if end is not None else len(lines)) + 1
    return fences


def extract_code(text: str, lang: str = "python") -> ParseResult:
    """The code block of `lang` in an answer. Among several, the last block defining
    `class ModelNew` wins, else the longest; closed blocks are preferred to a cut-off one."""
    try:
        return _extract_code(text, lang.lower())
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"
        return ParseResult(False, None, f"could not read the answer: {type(exc).__name__}: {exc}")


def _extract_code(text: str, lang: str) -> ParseResult:
    if not isinstance(text, str) or not text.strip():
        return ParseResult(False, None, "the answer is empty")
    tags = LANG_TAGS.get(lang, {lang}) | {""}
    fences = find_fences(text)
    candidates = [f for f in fences if f.tag in tags]
    if candidates:
        chosen = _choose(candidates)
        return _checked(chosen.body.strip("\n"), lang, chosen.closed)
    if fences:
        found = ", ".join(sorted({f.tag for f in fences}))
        return ParseResult(False, None, f"the answer has code blocks tagged {found} but none "
                                        f"tagged {lang}; put the code in one ```{lang} block")
    bare = _unfenced_code(text, lang)
    if bare is None:
        return ParseResult(False, None, f"the answer holds no code: put the complete code in one "
                                        f"```{lang} ... ``` block")
    return _checked(bare, lang, closed=True)


def _choose(candidates: list[Fence]) -> Fence:
    closed = [f for f in candidates if f.closed] or candidates
    with_model = [f for f in closed if _DEFINES_MODEL_NEW.search(f.body)]
    if with_model:
        return with_model[-1]
    return max(closed, key=lambda f: len(f.body))


def _unfenced_code(text: str, lang: str) -> str | None:
    """The whole answer (or all of it from the first line that starts code) when it is code."""
    stripped = text.strip("\n")
    if lang not in LANG_TAGS["python"]:
        return stripped if re.search(r"__global__|#include|\{", stripped) else None
    for candidate in (stripped, _from_first_code_line(stripped)):
        if candidate and _is_python_module(candidate):
            return candidate
    return None


def _from_first_code_line(text: str) -> str | None:
    match = _CODE_START.search(text)
    return text[match.start():] if match and match.start() > 0 else None


def _is_python_module(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    kinds = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign)
    return any(isinstance(node, kinds) for node in tree.body)


def _checked(code: str, lang: str, closed: bool) -> ParseResult:
    if not code.strip():
        return ParseResult(False, None, f"the ```{lang} block is empty")
    if lang not in LANG_TAGS["python"]:
        return ParseResult(True, code)
    try:
        ast.parse(code)
    except SyntaxError as exc:
        cut = " The block was never closed: the answer was probably cut off." if not closed else ""
        return ParseResult(False, code, f"the python code has a syntax error at line {exc.lineno}: "
                                        f"{exc.msg}.{cut}")
    except ValueError as exc:  # e.g. null bytes
        return ParseResult(False, code, f"the python code cannot be parsed: {exc}")
    return ParseResult(True, code)


def extract_json(text: str) -> ParseResult:
    """The JSON value in an answer: the whole text, else a fenced block (```json first), else
    the first object/array embedded in prose. Trailing commas are forgiven."""
    try:
        return _extract_json(text)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises"
        return ParseResult(False, None, f"could not read the answer: {type(exc).__name__}: {exc}")


def _extract_json(text: str) -> ParseResult:
    if not isinstance(text, str) or not text.strip():
        return ParseResult(False, None, "the answer is empty")
    fences = sorted(find_fences(text), key=lambda f: f.tag not in LANG_TAGS["json"])
    errors = []
    for candidate in [*(f.body for f in fences), text]:
        value, error = _loads(candidate.strip())
        if error is None:
            return ParseResult(True, value)
        errors.append(error)
    value = _embedded_json(text)
    if value is not None:
        return ParseResult(True, value)
    return ParseResult(False, None, f"the answer holds no valid JSON ({errors[0]}); "
                                    "reply with one ```json block")


def _loads(candidate: str) -> tuple[Any, str | None]:
    try:
        return json.loads(candidate), None
    except json.JSONDecodeError as exc:
        error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    repaired = _TRAILING_COMMA.sub(r"\1", candidate)
    if repaired != candidate:
        try:
            return json.loads(repaired), None
        except json.JSONDecodeError:
            pass
    return None, error


def _embedded_json(text: str) -> Any:
    decoder = json.JSONDecoder()
    for opener, kind in (("{", dict), ("[", list)):  # an object beats a list like "see [1]"
        starts = [m.start() for m in re.finditer(re.escape(opener), text)][:_MAX_JSON_STARTS]
        for start in starts:
            try:
                value, _ = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            if isinstance(value, kind) and value:
                return value
    return None
