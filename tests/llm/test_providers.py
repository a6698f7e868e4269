"""The provider registry is the one list: spec parsing and its errors, the config's keys, building,
`--llm`'s help and docs/providers.md all follow it, so one entry is enough to add a provider."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelwright.llm import ConfigError, LLMConfig, make_provider, parse_spec, providers
from kernelwright.llm.keys import resolve_key
from kernelwright.llm.provider import Provider
from kernelwright.llm.spec import spec_help
from kernelwright.llm.types import Completion, CompletionRequest, Usage

DOC = Path(__file__).resolve().parents[2] / "docs" / "providers.md"
EXAMPLE = {providers.MODEL: "m", providers.PATH: "some/dir", providers.WRAPPER: "tape.jsonl=openai:m"}


class AcmeProvider(Provider):
    """A provider added by the test: built from its entry, with the key its entry names."""

    name = "acme"

    def __init__(self, model: str, key: str):
        self.model, self.key, self.spec = model, key, f"acme:{model}"

    @classmethod
    def from_spec(cls, spec, config, retry, build) -> "AcmeProvider":
        key, _ = resolve_key(spec.base_url, config, providers.kind("acme").vendor, "acme")
        return cls(spec.model, key)

    async def complete(self, request: CompletionRequest) -> Completion:
        return Completion(text="", model=self.model, provider=self.name, usage=Usage(0, 0), cost_usd=0.0,
                          request_hash=self.request_hash(request))


ACME = providers.ProviderKind("acme", providers.MODEL, (("acme:MODEL", "Acme's hosted models"),),
                              builds=f"{__name__}:AcmeProvider",
                              vendor=providers.Vendor("api.acme.example", "ACME_API_KEY", placeholder=None))


@pytest.mark.parametrize("entry", providers.PROVIDERS, ids=providers.names())
def test_every_entry_names_a_provider_class_and_parses(entry):
    assert issubclass(entry.provider_class(), Provider)
    assert entry.provider_class().from_spec.__func__ is not Provider.from_spec.__func__  # it builds itself
    spec = parse_spec(f"{entry.name}:{EXAMPLE[entry.takes]}")
    assert spec.kind == (entry.family or entry.name)
    for form, _ in entry.forms:
        assert form.startswith(f"{entry.name}:") and form in spec_help()


def test_docs_table_is_rendered_from_the_registry():
    text = DOC.read_text()
    assert providers.replace_docs_table(text) == text, \
        "docs/providers.md is stale: python -m kernelwright.llm --docs docs/providers.md"
    for vendor in providers.vendors():
        assert f"`{vendor.env_name}`" in text


def test_llm_help_names_every_provider():
    from kernelwright.cli.app import app

    result = CliRunner().invoke(app, ["optimize", "--help"], env={"COLUMNS": "300"})
    shown = " ".join(re.sub(r"[│╭╮╰╯─]", " ", result.output).split())
    assert result.exit_code == 0 and "PROVIDER one of " + ", ".join(providers.names()) in shown


def test_an_entry_is_enough_for_parsing_config_keys_building_and_docs(monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="unknown LLM provider 'acme'"):
        parse_spec("acme:big")
    monkeypatch.setattr(providers, "PROVIDERS", (*providers.PROVIDERS, ACME))
    assert parse_spec("acme:big") == dataclasses.replace(parse_spec("acme:big"), kind="acme", model="big")
    assert "acme:MODEL" in spec_help() and "| `acme:MODEL` | Acme's hosted models (key: `ACME_API_KEY`) |" in \
        providers.docs_table()
    config = LLMConfig().with_keys_from({"ACME_API_KEY": "sk-acme"})
    assert config.api_keys["ACME_API_KEY"].get_secret_value() == "sk-acme" and "sk-acme" in config.secrets()
    built = make_provider("acme:big", config)
    assert isinstance(built, AcmeProvider) and (built.model, built.key) == ("big", "sk-acme")
    with pytest.raises(ConfigError, match="ACME_API_KEY is not set"):
        make_provider("acme:big", LLMConfig().with_keys_from({}))
    path = tmp_path / "kernelwright.toml"
    path.write_text('[llm]\nacme_api_key = "sk-in-a-file"\n')
    with pytest.raises(ConfigError, match="ACME_API_KEY"):
        LLMConfig.load(path, env={})
