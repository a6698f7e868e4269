"""Record a provider into a cassette, then replay it without any network traffic."""
from __future__ import annotations

import json

import pytest
from fake_server import openai_reply
from llm_helpers import ALL_TEST_KEYS, make_config, run

from kernelwright.llm import (CassetteMiss, Completion, CompletionRequest, ConfigError, Message,
                              RecordingProvider, ReplayProvider, Usage, make_provider)
from kernelwright.llm.cassette import CassetteEntry, append_entry


def ask(text: str, role: str = "coder") -> CompletionRequest:
    return CompletionRequest([Message("user", text)], role=role, metadata={"ask_id": text})


def test_record_then_replay_round_trip(server, sleeps, tmp_path):
    cassette = tmp_path / "run.jsonl"
    server.push(openai_reply("answer one", prompt_tokens=10, completion_tokens=3),
                openai_reply("answer two", prompt_tokens=20, completion_tokens=4))
    config = make_config(server, prices={"qwen": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}})
    recorder = make_provider(f"record:{cassette}=openai:qwen@{server.openai_base_url}", config,
                             sleep=sleeps)
    assert isinstance(recorder, RecordingProvider)
    live = [run(recorder.complete(ask("first"))), run(recorder.complete(ask("second", "planner")))]

    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert [line["completion"]["text"] for line in lines] == ["answer one", "answer two"]
    assert lines[0]["source"] == f"openai:qwen@{server.openai_base_url} via record"
    assert lines[0]["request"]["model"] == "qwen" and lines[0]["request"]["role"] == "coder"
    assert "metadata" not in lines[0]["request"]
    assert lines[0]["hash"] == ask("first").stable_hash("qwen")
    assert not any(key in cassette.read_text() for key in ALL_TEST_KEYS)

    replay = make_provider(f"replay:{cassette}", make_config(None))
    assert isinstance(replay, ReplayProvider) and replay.model == "qwen"
    replayed = [run(replay.complete(ask("first"))), run(replay.complete(ask("second", "planner")))]
    for before, after in zip(live, replayed, strict=False):
        assert (after.text, after.usage, after.cost_usd, after.model) == \
               (before.text, before.usage, before.cost_usd, before.model)
        assert after.request_hash == before.request_hash and after.provider == "replay"
    assert len(server.seen) == 2  # replay made no request

    with pytest.raises(CassetteMiss, match=r"no answer for request .*'coder'.*never asked") as miss:
        run(replay.complete(ask("never asked")))
    assert miss.value.request_hash == ask("never asked").stable_hash("qwen")
    with pytest.raises(CassetteMiss):  # the role is part of the request
        run(replay.complete(ask("first", role="planner")))


def hand_written(tmp_path, answers: list[str], text: str = "same prompt"):
    """A cassette written by hand (source says so) holding several answers to one prompt."""
    path = tmp_path / "hand.jsonl"
    req = ask(text)
    for answer in answers:
        completion = Completion(answer, "m", "openai", Usage(5, 5), 0.0, req.stable_hash("m"), 0.0, "stop")
        append_entry(path, CassetteEntry.make(req, "m", completion, source="hand-written"))
    return path, req


def test_repeated_prompt_replays_recordings_in_order_then_repeats_the_last(tmp_path):
    path, req = hand_written(tmp_path, ["first try", "second try"])
    replay = ReplayProvider(path)
    assert [run(replay.complete(req)).text for _ in range(3)] == ["first try", "second try", "second try"]


def test_replay_with_fallback_asks_and_records_only_misses(server, sleeps, tmp_path):
    path, req = hand_written(tmp_path, ["on tape"])
    server.push(openai_reply("fresh"))
    provider = make_provider(f"replay:{path}=openai:m@{server.openai_base_url}",
                             make_config(server), sleep=sleeps)
    assert run(provider.complete(req)).text == "on tape"
    assert run(provider.complete(ask("new prompt"))).text == "fresh"
    assert len(server.seen) == 1
    assert len(path.read_text().splitlines()) == 2
    again = ReplayProvider(path)  # the fallback's answer is now on tape
    assert run(again.complete(ask("new prompt"))).text == "fresh"


def test_missing_cassette_misses_clearly(tmp_path):
    replay = ReplayProvider(tmp_path / "absent.jsonl")
    with pytest.raises(CassetteMiss, match="empty or missing"):
        run(replay.complete(ask("x")))


def test_corrupt_cassette_names_the_line(tmp_path):
    path, _ = hand_written(tmp_path, ["ok"])
    with path.open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(ConfigError, match="line 2"):
        ReplayProvider(path)
