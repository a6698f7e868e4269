"""CompletionRequest.stable_hash: what changes the hash and what must not."""
from __future__ import annotations

import hashlib
import json

import pytest

from kernelwright.llm import Completion, CompletionRequest, Message, Usage


def base(**kw) -> CompletionRequest:
    return CompletionRequest([Message("system", "s"), Message("user", "u")], **kw)


def test_hash_is_sha256_of_the_documented_canonical_json():
    req = base(max_tokens=100, temperature=0.5, stop="END")
    payload = {"v": 1, "model": "m", "role": "coder",
               "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
               "max_tokens": 100, "temperature": 0.5, "stop": ["END"]}
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert req.stable_hash("m") == hashlib.sha256(canonical.encode()).hexdigest()


def test_metadata_does_not_change_the_hash():
    assert base(metadata={"run": 1}).stable_hash("m") == base(metadata={"run": 2}).stable_hash("m")


@pytest.mark.parametrize("change", [
    {"role": "planner"}, {"max_tokens": 10}, {"temperature": 0.9}, {"stop": ["x"]},
])
def test_each_answer_relevant_field_changes_the_hash(change):
    assert base(**change).stable_hash("m") != base().stable_hash("m")


def test_model_and_message_content_change_the_hash():
    assert base().stable_hash("a") != base().stable_hash("b")
    other = CompletionRequest([Message("system", "s"), Message("user", "u!")])
    assert other.stable_hash("m") != base().stable_hash("m")


def test_request_and_completion_round_trip_through_dicts():
    req = base(stop=["a"], metadata={"ask": 3})
    assert CompletionRequest.from_dict(json.loads(json.dumps(req.to_dict()))) == req
    done = Completion("t", "m", "openai", Usage(1, 2), 0.5, "h", 0.1, "stop")
    assert Completion.from_dict(json.loads(json.dumps(done.to_dict()))) == done


def test_bad_messages_are_rejected_clearly():
    with pytest.raises(ValueError, match="role must be one of"):
        Message("robot", "hi")
    with pytest.raises(ValueError, match="at least one message"):
        CompletionRequest([])
