"""`python -m kernelwright.rules [NAME] [--docs FILE]`: print a rule set as the model reads it, or
rewrite the rules section of a Markdown file (docs/judge.md) from the definitions."""
from __future__ import annotations

import argparse
from pathlib import Path

from .render import prompt_markdown, replace_docs_section
from .sets import DEFAULT, NAMES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.rules", description=__doc__.split("\n")[0])
    parser.add_argument("name", nargs="?", default=DEFAULT, choices=NAMES)
    parser.add_argument("--docs", type=Path, help="rewrite this file's rules section (between its markers)")
    args = parser.parse_args(argv)
    if args.docs:
        args.docs.write_text(replace_docs_section(args.docs.read_text()))
        print(f"rewrote the rules section of {args.docs}")
        return 0
    print(prompt_markdown(args.name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
