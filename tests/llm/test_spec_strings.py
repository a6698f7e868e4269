"""Spec strings select a provider and model."""
from __future__ import annotations

import pytest

from kernelwright.llm import ConfigError, parse_spec


def test_hosted_and_self_hosted_specs():
    assert parse_spec("openai:gpt-5").model == "gpt-5"
    spec = parse_spec("openai:qwen2.5-coder@http://localhost:8000/v1")
    assert (spec.kind, spec.model, spec.base_url) == ("openai", "qwen2.5-coder", "http://localhost:8000/v1")
    assert parse_spec("anthropic:claude-sonnet-4-5").kind == "anthropic"


def test_model_ids_with_at_signs_keep_them():
    spec = parse_spec("anthropic:claude-3-5-sonnet@20240620")
    assert spec.model == "claude-3-5-sonnet@20240620" and spec.base_url is None


@pytest.mark.parametrize("alias,url", [("vllm", "http://localhost:8000/v1"),
                                       ("sglang", "http://localhost:30000/v1"),
                                       ("ollama", "http://localhost:11434/v1")])
def test_local_server_aliases(alias, url):
    spec = parse_spec(f"{alias}:some-model")
    assert (spec.kind, spec.model, spec.base_url) == ("openai", "some-model", url)
    assert parse_spec(f"{alias}:m@http://gpu-box:9000/v1").base_url == "http://gpu-box:9000/v1"


def test_cassette_and_exchange_specs():
    record = parse_spec("record:runs/a.jsonl=openai:gpt-5")
    assert (record.kind, record.path, record.inner.model) == ("record", "runs/a.jsonl", "gpt-5")
    assert parse_spec("replay:runs/a.jsonl").inner is None
    assert parse_spec("replay:a.jsonl=openai:m@http://h:1/v1").inner.base_url == "http://h:1/v1"
    assert parse_spec("exchange:prompts/").path == "prompts/"


def test_str_redacts_credentials_in_urls():
    spec = parse_spec("openai:m@https://user:sekrit@host.example/v1?key=sekrit2")
    assert "sekrit" not in str(spec) and str(spec).startswith("openai:m@https://host.example/v1")


@pytest.mark.parametrize("bad,match", [
    ("gpt-5", "no provider prefix"), ("gemini:x", "unknown LLM provider"), ("openai:", "missing"),
    ("record:a.jsonl", "needs the provider"), ("replay:a.jsonl=record:b=openai:m", "cannot wrap"),
    ("openai:@http://h/v1", "names no model"),
])
def test_bad_specs_say_what_is_accepted(bad, match):
    with pytest.raises(ConfigError, match=match):
        parse_spec(bad)
