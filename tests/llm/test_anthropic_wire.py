"""The anthropic provider against a loopback server speaking the messages wire format, through
the real anthropic SDK."""
from __future__ import annotations

import pytest
from fake_server import Reply, error_reply, anthropic_reply
from llm_helpers import TEST_ENDPOINT_KEY, make_config, run

from kernelwright.llm import (CompletionRequest, ConfigError, Message, ProviderAuthError,
                              ProviderRequestError, ProviderResponseError, make_provider)


def request(**kw) -> CompletionRequest:
    messages = [Message("system", "you write kernels"), Message("user", "write ModelNew"),
                Message("assistant", "Here is a first try."), Message("user", "make it faster")]
    return CompletionRequest(messages, role="planner", **kw)


def provider_for(server, sleeps, **config):
    spec = f"anthropic:claude-test@{server.base_url}"
    return make_provider(spec, make_config(server, **config), sleep=sleeps)


def test_success_sends_system_separately_and_reads_usage(server, sleeps):
    server.push(anthropic_reply("plan: tile it", input_tokens=200, output_tokens=40))
    prices = {"claude-test": {"input_per_mtok": 3.0, "output_per_mtok": 15.0}}
    req = request(max_tokens=512, temperature=0.3, stop=["STOP"])

    completion = run(provider_for(server, sleeps, prices=prices).complete(req))

    assert completion.text == "plan: tile it"
    assert completion.provider == "anthropic" and completion.model == "fake-claude"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (200, 40)
    assert completion.cost_usd == pytest.approx((200 * 3.0 + 40 * 15.0) / 1e6)
    assert completion.finish_reason == "stop"
    assert completion.request_hash == req.stable_hash("claude-test")
    [seen] = server.seen
    assert seen.path == "/v1/messages"
    assert TEST_ENDPOINT_KEY in (seen.headers.get("x-api-key", "") + seen.headers.get("authorization", ""))
    body = seen.json()
    assert body["system"] == "you write kernels"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["max_tokens"] == 512 and "temperature" not in body
    assert body["stop_sequences"] == ["STOP"]


def test_temperature_is_sent_only_when_the_model_options_ask(server, sleeps):
    server.push(anthropic_reply("ok"))
    provider = provider_for(server, sleeps, models={"claude-test": {"send_temperature": True}})
    run(provider.complete(request(temperature=0.3)))
    assert server.seen[0].json()["temperature"] == 0.3


def test_max_tokens_stop_is_normalised_to_length(server, sleeps):
    server.push(anthropic_reply("cut", stop_reason="max_tokens"))
    assert run(provider_for(server, sleeps).complete(request())).finish_reason == "length"


def test_429_then_529_overloaded_then_success(server, sleeps):
    server.push(error_reply(429, "rate limited", {"Retry-After": "4"}),
                error_reply(529, "overloaded"), anthropic_reply("ok"))
    assert run(provider_for(server, sleeps).complete(request())).text == "ok"
    assert sleeps.delays[0] == 4.0 and len(sleeps.delays) == 2


def test_timeout_and_truncation_are_retried(server, sleeps):
    server.push(anthropic_reply("slow", delay_s=1.5), anthropic_reply("y" * 300, truncate=30),
                anthropic_reply("ok"))
    provider = provider_for(server, sleeps, timeout_s=0.3)
    assert run(provider.complete(request())).text == "ok"
    assert len(server.seen) == 3


def test_garbage_body_gives_up_with_response_error(server, sleeps):
    server.push(*[Reply(body="\x00\x01garbage", headers={"Content-Type": "application/json"})] * 4)
    with pytest.raises(ProviderResponseError):
        run(provider_for(server, sleeps).complete(request()))


def test_401_and_400_are_not_retried(server, sleeps):
    server.push(error_reply(401, "invalid x-api-key"), error_reply(400, "messages: roles must alternate"))
    with pytest.raises(ProviderAuthError, match="HTTP 401"):
        run(provider_for(server, sleeps).complete(request()))
    with pytest.raises(ProviderRequestError, match="roles must alternate"):
        run(provider_for(server, sleeps).complete(request()))
    assert len(server.seen) == 2 and sleeps.delays == []


def test_anthropic_key_is_not_sent_to_a_foreign_endpoint():
    with pytest.raises(ConfigError, match="no key is configured"):
        make_provider("anthropic:claude-x@http://127.0.0.1:9/v1", make_config(None))
