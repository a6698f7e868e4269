"""The exchange provider: prompts as files, answers by hand, pause and resume across processes.
Answers written in these tests are hand-written test data."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llm_helpers import run

from kernelwright.llm import (EXIT_ANSWER_PENDING, AnswerPending, CompletionRequest,
                              ExchangeProvider, Message, list_pending, make_provider)
from kernelwright.llm.config import LLMConfig

REPO = Path(__file__).resolve().parents[2]


def ask(text: str = "Write ModelNew for a ReLU.", role: str = "coder") -> CompletionRequest:
    return CompletionRequest([Message("system", "You write fast kernels."), Message("user", text)],
                             role=role, max_tokens=1000, stop=["</done>"])


def test_missing_answer_pauses_with_readable_prompt(tmp_path):
    provider = ExchangeProvider(tmp_path)
    req = ask()
    with pytest.raises(AnswerPending) as info:
        run(provider.complete(req))
    short = req.stable_hash("exchange")[:12]
    prompt = tmp_path / f"{short}.prompt.md"
    assert info.value.prompt_paths == [prompt]
    assert info.value.answer_paths == [tmp_path / f"{short}.answer.md"]
    text = prompt.read_text()
    assert "| agent role | coder |" in text and f"{short}.answer.md" in text
    assert "## Message 1 of 2: system\n\nYou write fast kernels." in text
    assert "## Message 2 of 2: user\n\nWrite ModelNew for a ReLU." in text
    sidecar = json.loads((tmp_path / f"{short}.request.json").read_text())
    assert sidecar["hash"] == req.stable_hash("exchange")
    assert CompletionRequest.from_dict(sidecar["request"]) == req


def test_same_request_same_files_and_answer_is_read(tmp_path):
    provider = ExchangeProvider(tmp_path)
    req = ask()
    for _ in range(2):
        with pytest.raises(AnswerPending):
            run(provider.complete(req))
    assert len(list(tmp_path.glob("*.prompt.md"))) == 1
    [pending] = list_pending(tmp_path)
    pending.answer_path.write_text("  \n")  # an empty answer is still pending (being typed)
    with pytest.raises(AnswerPending):
        run(provider.complete(req))
    pending.answer_path.write_text("```python\nclass ModelNew: ...\n```\n")  # hand-written
    completion = run(provider.complete(req))
    assert completion.text.startswith("```python") and completion.provider == "exchange"
    assert completion.request_hash == req.stable_hash("exchange") and completion.cost_usd == 0.0
    assert list_pending(tmp_path) == []


def test_answer_txt_is_accepted(tmp_path):
    provider = ExchangeProvider(tmp_path)
    with pytest.raises(AnswerPending) as info:
        run(provider.complete(ask()))
    info.value.answer_paths[0].with_suffix(".txt").write_text("plain answer")
    assert run(provider.complete(ask())).text == "plain answer"


def test_many_prompts_pending_at_once(tmp_path):
    import asyncio

    provider = ExchangeProvider(tmp_path)
    requests = [ask(f"problem {i}") for i in range(3)] + [ask("problem 0", role="planner")]

    async def ask_all():
        return await asyncio.gather(*(provider.complete(r) for r in requests), return_exceptions=True)

    errors = run(ask_all())
    combined = AnswerPending.combine(errors)
    assert len(combined.prompt_paths) == 4
    assert "4 prompt(s) wait" in str(combined)
    pending = list_pending(tmp_path)
    assert {p.request.role for p in pending} == {"coder", "planner"}
    assert sorted(p.prompt_path for p in pending) == combined.prompt_paths


SCRIPT = textwrap.dedent('''
    import asyncio, sys
    from kernelwright.llm import (EXIT_ANSWER_PENDING, AnswerPending, CompletionRequest, Message,
                                  make_provider)
    from kernelwright.llm.config import LLMConfig

    provider = make_provider("exchange:" + sys.argv[1], LLMConfig())
    request = CompletionRequest([Message("user", "Optimise this matmul.")], role="coder")
    try:
        completion = asyncio.run(provider.complete(request))
    except AnswerPending as pending:
        print("PENDING", *pending.prompt_paths)
        sys.exit(EXIT_ANSWER_PENDING)
    print("ANSWER", completion.text)
''')


def test_pause_and_resume_across_two_processes(tmp_path):
    folder = tmp_path / "exchange"
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def ask_in_subprocess():
        return subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)

    first = ask_in_subprocess()
    assert first.returncode == EXIT_ANSWER_PENDING, first.stderr
    [pending] = list_pending(folder)
    assert first.stdout.split() == ["PENDING", str(pending.prompt_path)]
    assert pending.request.messages[0].content == "Optimise this matmul."

    pending.answer_path.write_text("use a tiled kernel")  # hand-written answer
    second = ask_in_subprocess()
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "ANSWER use a tiled kernel"


def test_exchange_spec_builds_the_provider(tmp_path):
    provider = make_provider(f"exchange:{tmp_path}", LLMConfig())
    assert isinstance(provider, ExchangeProvider) and provider.folder == tmp_path
