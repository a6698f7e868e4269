"""docs/providers.md stays true: its TOML loads and every spec string in it parses."""
from __future__ import annotations

import re
from pathlib import Path

from kernelwright.llm import LLMConfig, parse_spec
from kernelwright.llm.parse import find_fences
from kernelwright.llm.router import Router

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"


def test_toml_example_loads_and_builds_a_router(tmp_path):
    [toml] = [f.body for f in find_fences(DOC.read_text()) if f.tag == "toml"]
    path = tmp_path / "kernelwright.toml"
    path.write_text(toml)
    env = {"OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "y"}
    config = LLMConfig.load(path, env=env)
    assert config.spec_for("planner") == "anthropic:claude-sonnet-4-5"
    router = Router(config)  # every role's model is priced, as the dollar budget requires
    assert router.provider_for("coder").model == "qwen2.5-coder"


def test_every_spec_in_the_doc_parses():
    commands = "\n".join(f.body for f in find_fences(DOC.read_text()) if f.tag == "bash")
    specs = re.findall(r"--llm (\S+)", commands)
    assert len(specs) >= 10
    for spec in specs:
        parse_spec(spec)
