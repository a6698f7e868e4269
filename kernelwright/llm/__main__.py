"""`python -m kernelwright.llm --docs docs/providers.md`: re-render the page's table of spec forms
from the provider registry (`providers.PROVIDERS`)."""
from __future__ import annotations

import argparse
from pathlib import Path

from .providers import replace_docs_table

parser = argparse.ArgumentParser(prog="python -m kernelwright.llm", description=__doc__.splitlines()[0])
parser.add_argument("--docs", type=Path, required=True, help="the Markdown file whose providers section to re-render")
args = parser.parse_args()
args.docs.write_text(replace_docs_table(args.docs.read_text()))
