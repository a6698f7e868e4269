"""Router: per-role providers, budgets checked before a call, the concurrency limit, and the
call records handed to the caller's store."""
from __future__ import annotations

import asyncio

import pytest
from fake_server import error_reply, openai_reply
from llm_helpers import make_config, run

from kernelwright.llm import (BudgetExceeded, CompletionRequest, ConfigError, ExchangeProvider,
                              Message, ProviderRequestError)
from kernelwright.llm.router import Router

PRICES = {"cheap": {"input_per_mtok": 1.0, "output_per_mtok": 1.0},
          "dear": {"input_per_mtok": 100.0, "output_per_mtok": 100.0}}


def ask(role: str = "coder", text: str = "go", max_tokens: int = 100) -> CompletionRequest:
    return CompletionRequest([Message("user", text)], role=role, max_tokens=max_tokens)


def router_for(server, sleeps, tmp_path=None, **config) -> Router:
    config.setdefault("prices", PRICES)
    return Router(make_config(server, **config), f"openai:cheap@{server.openai_base_url}", sleep=sleeps)


def test_roles_use_their_own_models(server, sleeps, tmp_path):
    server.push(openai_reply("from dear"), openai_reply("from cheap"))
    router = router_for(server, sleeps,
                        roles={"planner": f"openai:dear@{server.openai_base_url}",
                               "analyst": f"exchange:{tmp_path}"})
    assert run(router.complete(ask("planner"))).text == "from dear"
    assert run(router.complete(ask("coder"))).text == "from cheap"
    assert [s.json()["model"] for s in server.seen] == ["dear", "cheap"]
    assert isinstance(router.provider_for("analyst"), ExchangeProvider)
    assert router.provider_for("coder") is router.provider_for("repairer")  # shared default


def test_call_budget_is_enforced_before_the_call(server, sleeps):
    server.push(openai_reply("one"), openai_reply("two"))
    router = router_for(server, sleeps, budget={"max_calls": 1})
    run(router.complete(ask()))
    with pytest.raises(BudgetExceeded, match="calls would be exceeded"):
        run(router.complete(ask()))
    assert len(server.seen) == 1


def test_token_budget_counts_real_usage_and_refuses_the_worst_case(server, sleeps):
    server.push(openai_reply("a", prompt_tokens=50, completion_tokens=50))
    router = router_for(server, sleeps, budget={"max_tokens": 300})
    run(router.complete(ask(max_tokens=100)))
    assert router.budget.tokens == 100
    # 100 used + (estimated prompt + 250 max output) > 300: refused without a request.
    with pytest.raises(BudgetExceeded, match="tokens"):
        run(router.complete(ask(max_tokens=250)))
    assert len(server.seen) == 1


def test_dollar_budget_uses_the_model_price(server, sleeps):
    server.push(openai_reply("a", prompt_tokens=1000, completion_tokens=1000))
    router = router_for(server, sleeps, budget={"max_usd": 0.5},
                        roles={"planner": f"openai:dear@{server.openai_base_url}"})
    # dear: up to 10_000 output tokens at $100/M = $1 > $0.5: refused before any request.
    with pytest.raises(BudgetExceeded, match="dollars"):
        run(router.complete(ask("planner", max_tokens=10_000)))
    completion = run(router.complete(ask("coder", max_tokens=1000)))
    assert completion.cost_usd == pytest.approx(0.002)
    assert router.budget.snapshot()["usd"] == pytest.approx(0.002)
    assert len(server.seen) == 1


def test_dollar_budget_without_a_price_is_a_config_error(server, sleeps):
    with pytest.raises(ConfigError, match=r'llm.prices."unpriced"'):
        Router(make_config(server, budget={"max_usd": 1.0}),
               f"openai:unpriced@{server.openai_base_url}", sleep=sleeps)


def test_concurrent_calls_share_the_budget(server, sleeps):
    server.push(*[openai_reply("x", prompt_tokens=1, completion_tokens=1, delay_s=0.2)] * 5)
    router = router_for(server, sleeps, budget={"max_calls": 3}, concurrency=5)

    async def five():
        return await asyncio.gather(*(router.complete(ask(text=str(i))) for i in range(5)),
                                    return_exceptions=True)

    results = run(five())
    assert sum(isinstance(r, BudgetExceeded) for r in results) == 2
    assert len(server.seen) == 3 and router.budget.calls == 3


def test_concurrency_limit_holds(server, sleeps):
    server.push(*[openai_reply("x", delay_s=0.15)] * 6)
    router = router_for(server, sleeps, concurrency=2)

    async def six():
        return await asyncio.gather(*(router.complete(ask(text=str(i))) for i in range(6)))

    assert len(run(six())) == 6
    assert server.max_in_flight == 2


def test_every_call_is_handed_to_the_store_including_failures(server, sleeps):
    records = []
    server.push(openai_reply("fine"), error_reply(400, "bad param"))
    router = Router(make_config(server), f"openai:cheap@{server.openai_base_url}",
                    on_call=records.append, sleep=sleeps)
    req = ask()
    req.metadata["ask_id"] = "a1"
    run(router.complete(req))
    with pytest.raises(ProviderRequestError):
        run(router.complete(ask(text="second")))
    ok, failed = [r.to_dict() for r in records]
    assert ok["completion"]["text"] == "fine" and ok["request"]["metadata"] == {"ask_id": "a1"}
    assert ok["request_hash"] == req.stable_hash("cheap") and ok["budget"]["calls"] == 1
    assert failed["completion"] is None and failed["error_type"] == "ProviderRequestError"
    assert router.budget.calls == 1  # a failed call releases its reservation


def test_async_store_hook_is_awaited(server, sleeps):
    seen = []

    async def store(record):
        await asyncio.sleep(0)
        seen.append(record.completion.text)

    server.push(openai_reply("kept"))
    router = Router(make_config(server), f"openai:cheap@{server.openai_base_url}",
                    on_call=store, sleep=sleeps)
    run(router.complete(ask()))
    assert seen == ["kept"]


def test_role_without_a_spec_is_a_clear_error():
    router = Router(make_config(None))
    with pytest.raises(ConfigError, match="no LLM is configured for agent role 'coder'"):
        run(router.complete(ask()))


def test_role_specs_beat_config_roles_and_explicit_providers_beat_both(tmp_path):
    config = make_config(None, roles={"planner": f"exchange:{tmp_path / 'from-config'}"})
    custom = ExchangeProvider(tmp_path / "explicit")
    router = Router(config, f"exchange:{tmp_path / 'default'}",
                    role_specs={"planner": f"exchange:{tmp_path / 'from-flag'}"},
                    providers={"coder": custom})
    assert router.provider_for("planner").folder == tmp_path / "from-flag"
    assert router.provider_for("coder") is custom
    assert router.provider_for("analyst").folder == tmp_path / "default"


def test_pending_exchange_answer_releases_its_budget(tmp_path):
    from kernelwright.llm import AnswerPending, list_pending

    records = []
    router = Router(make_config(None, budget={"max_calls": 1}), f"exchange:{tmp_path}",
                    on_call=records.append)
    for _ in range(2):  # a pause holds nothing: asking again is not refused
        with pytest.raises(AnswerPending):
            run(router.complete(ask()))
    assert router.budget.calls == 0 and records[-1].error_type == "AnswerPending"
    [pending] = list_pending(tmp_path)
    pending.answer_path.write_text("hand-written answer")
    assert run(router.complete(ask())).text == "hand-written answer"
    assert router.budget.calls == 1
