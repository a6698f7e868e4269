"""Keys never reach logs, error messages, cassettes, exchange files or call records."""
from __future__ import annotations

import json
import logging

import pytest
from fake_server import error_reply, openai_reply
from llm_helpers import ALL_TEST_KEYS, TEST_ENDPOINT_KEY, make_config, run

from kernelwright.llm import CompletionRequest, Message, ProviderAuthError
from kernelwright.llm.errors import AnswerPending
from kernelwright.llm.redact import redact_text, redact_url
from kernelwright.llm.router import Router


def assert_no_key(text: str) -> None:
    for key in ALL_TEST_KEYS:
        assert key not in text


def test_a_whole_run_writes_no_key_anywhere(server, sleeps, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the SDKs' and httpx's included
    cassette = tmp_path / "c.jsonl"
    records = []
    server.push(error_reply(429, "slow down", {"Retry-After": "0"}), openai_reply("ok"),
                error_reply(401, f"Incorrect API key provided: {TEST_ENDPOINT_KEY}"))
    router = Router(make_config(server), f"record:{cassette}=openai:m@{server.openai_base_url}",
                    role_specs={"planner": f"exchange:{tmp_path / 'ex'}"},
                    on_call=records.append, sleep=sleeps)
    run(router.complete(CompletionRequest([Message("user", "hello")])))
    with pytest.raises(ProviderAuthError) as auth:
        run(router.complete(CompletionRequest([Message("user", "again")])))
    with pytest.raises(AnswerPending):  # the planner's exchange folder holds no answer yet
        run(router.complete(CompletionRequest([Message("user", "plan")], role="planner")))

    assert "Incorrect API key provided: ***" in str(auth.value)
    written = [cassette.read_text(), caplog.text, str(auth.value), repr(router.config),
               json.dumps([r.to_dict() for r in records])]
    written += [p.read_text() for p in (tmp_path / "ex").iterdir()]
    for text in written:
        assert_no_key(text)
    assert server.seen[0].headers["authorization"] == f"Bearer {TEST_ENDPOINT_KEY}"  # it was used


def test_redact_helpers():
    assert redact_url("https://u:pw@h.example:8443/v1?api_key=zz") == "https://h.example:8443/v1?***"
    assert redact_text("key sk-abcdefghijkl and TOPSECRET", ["TOPSECRET"]) == "key *** and ***"
