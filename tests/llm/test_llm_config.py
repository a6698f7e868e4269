"""LLMConfig: TOML + environment, keys only from the environment and never serialised."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.llm import ConfigError, LLMConfig

TOML = '''
[llm]
default = "openai:gpt-5"
concurrency = 3
timeout_s = 120

[llm.roles]
planner = "anthropic:claude-sonnet-4-5"
coder = "vllm:qwen2.5-coder"

[llm.prices."gpt-5"]
input_per_mtok = 1.25
output_per_mtok = 10.0

[llm.prices."claude-sonnet-4-5"]
input_per_mtok = 3.0
output_per_mtok = 15.0

[llm.models."gpt-5"]
max_tokens_field = "max_completion_tokens"

[llm.endpoints."https://openrouter.ai/api/v1"]
api_key_env = "OPENROUTER_API_KEY"

[llm.budget]
max_calls = 100
max_usd = 5.0

[llm.retry]
max_retries = 2
'''

ENV = {"OPENAI_API_KEY": "sk-cfg-openai-secret-111111", "ANTHROPIC_API_KEY": "sk-ant-cfg-secret-222222",
       "OPENROUTER_API_KEY": "sk-or-cfg-secret-333333"}


@pytest.fixture
def toml_file(tmp_path) -> Path:
    path = tmp_path / "kernelwright.toml"
    path.write_text(TOML)
    return path


def test_loads_roles_prices_budget_and_retry(toml_file):
    config = LLMConfig.load(toml_file, env=ENV)
    assert config.spec_for("planner") == "anthropic:claude-sonnet-4-5"
    assert config.spec_for("analyst") == "openai:gpt-5"
    assert config.concurrency == 3 and config.timeout_s == 120
    assert config.budget.max_calls == 100 and config.budget.max_usd == 5.0
    assert config.retry.max_retries == 2 and config.retry.base_delay_s == 1.0
    assert config.price_for("gpt-5").cost(1_000_000, 100_000) == pytest.approx(2.25)
    assert config.price_for("claude-sonnet-4-5-20250929").input_per_mtok == 3.0  # prefix match
    assert config.price_for("unknown-model") is None
    assert config.options_for("gpt-5").max_tokens_field == "max_completion_tokens"


def test_environment_overrides_specs(toml_file):
    env = {**ENV, "KW_LLM": "exchange:answers", "KW_LLM_ROLE_CODER": "openai:m"}
    config = LLMConfig.load(toml_file, env=env)
    assert config.default == "exchange:answers"
    assert config.spec_for("coder") == "openai:m"
    assert config.spec_for("planner") == "anthropic:claude-sonnet-4-5"


def test_config_path_from_environment(toml_file):
    config = LLMConfig.load(env={**ENV, "KW_CONFIG": str(toml_file)})
    assert config.concurrency == 3


def test_old_variable_names_still_work_with_a_note(toml_file, capsys):
    from kernelwright import envvars

    envvars._warned.clear()
    env = {**ENV, "KERNELWRIGHT_LLM": "exchange:old", "KERNELWRIGHT_LLM_ROLE_CODER": "openai:old",
           "KERNELWRIGHT_LLM_CONFIG": str(toml_file)}
    config = LLMConfig.load(env=env)
    assert config.concurrency == 3 and config.default == "exchange:old" and config.spec_for("coder") == "openai:old"
    notes = capsys.readouterr().err
    assert "KERNELWRIGHT_LLM is deprecated; use KW_LLM" in notes
    assert "KERNELWRIGHT_LLM_CONFIG is deprecated; use KW_CONFIG" in notes
    assert "KERNELWRIGHT_LLM_ROLE_CODER is deprecated; use KW_LLM_ROLE_CODER" in notes
    # the new name wins when both are set
    config = LLMConfig.load(toml_file, env={**env, "KW_LLM": "exchange:new", "KW_LLM_ROLE_CODER": "openai:new"})
    assert config.default == "exchange:new" and config.spec_for("coder") == "openai:new"


def test_whole_kernelwright_config_with_other_tables(tmp_path):
    path = tmp_path / "kernelwright.toml"
    path.write_text('[optimize]\nmax_evals = 3\n[judge]\ntrials = 2\n')  # no [llm] at all
    assert LLMConfig.load(path, env={}).default is None
    path.write_text('[llm]\ndefault = "exchange:x"\n[optimize]\nmax_evals = 3\n')
    assert LLMConfig.load(path, env={}).default == "exchange:x"
    path.write_text('[llm]\ndefault = "exchange:x"\n[serach]\nx = 1\n')
    with pytest.raises(ConfigError, match="serach"):
        LLMConfig.load(path, env={})


def test_keys_come_from_env_and_never_leave(toml_file):
    config = LLMConfig.load(toml_file, env=ENV)
    assert config.api_keys["OPENAI_API_KEY"].get_secret_value() == ENV["OPENAI_API_KEY"]
    assert config.endpoint_api_keys["https://openrouter.ai/api/v1"].get_secret_value() == ENV["OPENROUTER_API_KEY"]
    dumped = json.dumps(config.model_dump()) + config.model_dump_json() + repr(config) + str(config)
    for secret in ENV.values():
        assert secret not in dumped
    assert "api_keys" not in config.model_dump()
    assert sorted(config.secrets()) == sorted(ENV.values())


def test_keys_in_the_file_are_refused(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[llm]\nopenai_api_key = "sk-nope"\n')
    with pytest.raises(ConfigError, match="environment variables"):
        LLMConfig.load(path, env={})


def test_a_file_without_an_llm_table_is_read_whole(tmp_path):
    path = tmp_path / "llm.toml"
    path.write_text('default = "anthropic:claude-x"\n')
    assert LLMConfig.load(path, env={}).default == "anthropic:claude-x"


@pytest.mark.parametrize("text,match", [
    ("[llm\n", "not valid TOML"),
    ("[llm]\nconcurency = 3\n", "concurency"),  # a typo is an error, not a silent default
    ("[llm.prices.m]\ninput_per_mtok = -1\noutput_per_mtok = 1\n", "input_per_mtok"),
])
def test_bad_files_name_the_file_and_problem(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        LLMConfig.load(path, env={})
    assert str(path) in str(info.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        LLMConfig.load(tmp_path / "nope.toml", env={})
