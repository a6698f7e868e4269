"""The openai provider against a loopback server speaking the chat-completions wire format,
through the real openai SDK: success, retries (429 + Retry-After, 500, timeout, truncated and
garbage bodies) and the errors that must not be retried (401, 400)."""
from __future__ import annotations

import pytest
from fake_server import Reply, error_reply, openai_reply
from llm_helpers import TEST_ENDPOINT_KEY, make_config, run

from kernelwright.llm import (CompletionRequest, Message, ProviderAuthError, ProviderRequestError,
                              ProviderResponseError, ProviderUnavailable, make_provider)


def request(text: str = "write ModelNew", **kw) -> CompletionRequest:
    return CompletionRequest([Message("system", "you write kernels"), Message("user", text)], **kw)


def provider_for(server, sleeps, model="qwen2.5-coder", **config):
    spec = f"openai:{model}@{server.openai_base_url}"
    return make_provider(spec, make_config(server, **config), sleep=sleeps)


def test_success_reads_text_usage_and_cost(server, sleeps):
    server.push(openai_reply("```python\nx = 1\n```", model="qwen2.5-coder-served",
                             prompt_tokens=120, completion_tokens=30))
    prices = {"qwen2.5-coder": {"input_per_mtok": 2.0, "output_per_mtok": 10.0}}
    provider = provider_for(server, sleeps, prices=prices)
    req = request(max_tokens=256, temperature=0.7, stop=["</end>"])

    completion = run(provider.complete(req))

    assert completion.text == "```python\nx = 1\n```"
    assert completion.model == "qwen2.5-coder-served"
    assert completion.provider == "openai"
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (120, 30)
    assert completion.cost_usd == pytest.approx((120 * 2.0 + 30 * 10.0) / 1e6)
    assert completion.request_hash == req.stable_hash("qwen2.5-coder")
    assert completion.finish_reason == "stop"
    assert completion.latency_s >= 0
    [seen] = server.seen
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {TEST_ENDPOINT_KEY}"
    body = seen.json()
    assert body["model"] == "qwen2.5-coder"
    assert body["messages"] == [{"role": "system", "content": "you write kernels"},
                                {"role": "user", "content": "write ModelNew"}]
    assert body["max_tokens"] == 256 and body["temperature"] == 0.7 and body["stop"] == ["</end>"]
    assert sleeps.delays == []


def test_model_options_change_the_wire_request(server, sleeps):
    server.push(openai_reply("ok"))
    models = {"gpt-5": {"max_tokens_field": "max_completion_tokens", "extra_body": {"top_k": 20}}}
    provider = provider_for(server, sleeps, model="gpt-5-mini", models=models)
    run(provider.complete(request(max_tokens=99)))
    body = server.seen[0].json()
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body
    assert "temperature" not in body  # gpt-5 models sample at a fixed temperature
    assert body["top_k"] == 20


def test_length_finish_reason_is_kept(server, sleeps):
    server.push(openai_reply("```python\nclass ModelNew", finish_reason="length"))
    completion = run(provider_for(server, sleeps).complete(request()))
    assert completion.finish_reason == "length"


def test_429_honours_retry_after_then_succeeds(server, sleeps):
    server.push(error_reply(429, "rate limited", {"Retry-After": "7"}),
                error_reply(429, "rate limited", {"retry-after-ms": "1500"}),
                openai_reply("done"))
    completion = run(provider_for(server, sleeps).complete(request()))
    assert completion.text == "done"
    assert sleeps.delays == [7.0, 1.5]
    assert len(server.seen) == 3


def test_retry_after_is_capped(server, sleeps):
    server.push(error_reply(429, "rate limited", {"Retry-After": "86400"}), openai_reply("done"))
    provider = provider_for(server, sleeps, retry={"retry_after_cap_s": 30.0})
    assert run(provider.complete(request())).text == "done"
    assert sleeps.delays == [30.0]


def test_500_backs_off_then_succeeds(server, sleeps):
    server.push(error_reply(500, "boom"), error_reply(503, "busy"), openai_reply("done"))
    completion = run(provider_for(server, sleeps).complete(request()))
    assert completion.text == "done"
    assert len(sleeps.delays) == 2
    assert all(0 < d <= 0.05 for d in sleeps.delays)  # exponential backoff within max_delay_s


def test_timeout_is_retried(server, sleeps):
    server.push(openai_reply("too late", delay_s=1.5), openai_reply("in time"))
    provider = provider_for(server, sleeps, timeout_s=0.3)
    assert run(provider.complete(request())).text == "in time"
    assert len(sleeps.delays) == 1


def test_truncated_body_is_retried(server, sleeps):
    server.push(openai_reply("x" * 400, truncate=50), openai_reply("whole"))
    assert run(provider_for(server, sleeps).complete(request())).text == "whole"
    assert len(server.seen) == 2


def test_body_cut_off_every_time_gives_up_as_unavailable(server, sleeps):
    server.push(*[openai_reply("x" * 400, truncate=50)] * 4)
    with pytest.raises(ProviderUnavailable, match="cut off.*gave up after 4"):
        run(provider_for(server, sleeps).complete(request()))


def test_garbage_json_is_retried_then_reported(server, sleeps):
    garbage = Reply(body="{this is not json", headers={"Content-Type": "application/json"})
    server.push(*[garbage] * 4)
    with pytest.raises(ProviderResponseError, match="not a valid response.*gave up after 4"):
        run(provider_for(server, sleeps).complete(request()))
    assert len(server.seen) == 4


def test_wrong_shape_and_html_are_response_errors(server, sleeps):
    server.push(Reply(body={"unexpected": True}, headers={"Content-Type": "application/json"}),
                Reply(body="<html>proxy error</html>", headers={"Content-Type": "text/html"}),
                openai_reply("finally"))
    assert run(provider_for(server, sleeps).complete(request())).text == "finally"
    assert len(server.seen) == 3


def test_persistent_500_gives_up_with_clear_error(server, sleeps):
    server.push(*[error_reply(502, "bad gateway")] * 4)
    with pytest.raises(ProviderUnavailable, match="HTTP 502.*bad gateway.*gave up after 4") as info:
        run(provider_for(server, sleeps).complete(request()))
    assert info.value.status == 502
    assert len(sleeps.delays) == 3


def test_401_is_not_retried_and_names_the_key(server, sleeps):
    server.push(error_reply(401, "Incorrect API key provided"), openai_reply("never"))
    with pytest.raises(ProviderAuthError, match=r"rejected the API key \(HTTP 401\).*FAKE_ENDPOINT_KEY"):
        run(provider_for(server, sleeps).complete(request()))
    assert len(server.seen) == 1 and sleeps.delays == []


def test_400_is_not_retried_and_quotes_the_server(server, sleeps):
    server.push(error_reply(400, "maximum context length is 4096 tokens"), openai_reply("never"))
    with pytest.raises(ProviderRequestError, match="HTTP 400.*maximum context length"):
        run(provider_for(server, sleeps).complete(request()))
    assert len(server.seen) == 1 and sleeps.delays == []


def test_404_hints_at_the_model_name(server, sleeps):
    server.push(error_reply(404, "model 'nope' does not exist"))
    with pytest.raises(ProviderRequestError, match="model name"):
        run(provider_for(server, sleeps, model="nope").complete(request()))


def test_provider_survives_several_event_loops(server, sleeps):
    server.push(openai_reply("one"), openai_reply("two"))
    provider = provider_for(server, sleeps)
    assert run(provider.complete(request("a"))).text == "one"
    assert run(provider.complete(request("b"))).text == "two"


def test_self_hosted_endpoint_without_key_gets_a_placeholder_not_the_openai_key(server, sleeps):
    server.push(openai_reply("ok"))
    config = make_config(None)  # no [llm.endpoints] entry for the server
    provider = make_provider(f"vllm:qwen@{server.openai_base_url}", config, sleep=sleeps)
    run(provider.complete(request()))
    assert server.seen[0].headers["authorization"] == "Bearer EMPTY"
