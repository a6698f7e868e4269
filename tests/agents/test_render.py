"""Rendering every agent on realistic contexts: what each sees, the budget, and the metadata."""
from __future__ import annotations

import dataclasses

import pytest

from kernelwright.agents import (AgentContext, Analyst, CandidateView, Coder, ParseFailure, Plan, Planner,
                                 PromptTemplateError, Repairer)
from kernelwright.llm.types import CompletionRequest

AGENTS = (Planner, Coder, Repairer, Analyst)


def user_text(request: CompletionRequest) -> str:
    return request.messages[-1].content


def system_text(request: CompletionRequest) -> str:
    return request.messages[0].content


@pytest.mark.parametrize("agent_cls", AGENTS)
def test_each_agent_renders_system_and_user_within_budget(agent_cls, relu_context):
    agent = agent_cls()
    request = agent.request(relu_context)
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.role == agent.name
    assert request.max_tokens > 0 and 0 <= request.temperature <= 1
    report = request.metadata["context"]
    assert report["budget"] == relu_context.token_budget and not report["over_budget"]
    assert report["used_tokens"] <= relu_context.token_budget
    assert request.estimated_input_tokens() <= relu_context.token_budget  # the llm layer's own count
    assert "class Model(nn.Module)" in user_text(request)  # the real reference source is shown
    assert "task" in report["included"]
    assert agent.render(relu_context) == request.messages  # render and request agree


@pytest.mark.parametrize("agent_cls", AGENTS)
def test_system_prompt_states_the_judge_rules_and_the_backend(agent_cls, relu_context, fused_context):
    triton_system = system_text(agent_cls().request(relu_context))
    cuda_system = system_text(agent_cls().request(fused_context))
    for text in (triton_system, cuda_system):
        assert "ModelNew" in text and "no caching" in text and "current CUDA stream" in text
        assert "3xTF32" in text and "Rule set: `kernelbench`" in text
    assert "@triton.jit" in triton_system and "getCurrentCUDAStream" not in triton_system
    assert "load_inline" in cuda_system and "getCurrentCUDAStream" in cuda_system
    assert "--use_fast_math" in cuda_system  # named to prefer targeted intrinsics
    assert "NVIDIA H100" in triton_system


@pytest.mark.parametrize("rules", ["kernelbench", "library", "strict"])
def test_system_prompt_carries_the_rendered_rules_of_the_run(rules, relu_context):
    from dataclasses import replace

    from kernelwright.rules import prompt_markdown

    text = system_text(Coder().request(replace(relu_context, rules=rules)))
    assert prompt_markdown(rules) in text  # one source of truth: the rules package
    others = {"kernelbench", "library", "strict"} - {rules}
    assert all(f"Rule set: `{other}`" not in text for other in others)


def test_a_first_version_coder_gets_the_worked_example_of_its_backend(relu_context, fused_context):
    """The example shows the answer's form to a Coder with no code to start from; with a candidate or
    a failing module in front of them, the Coder and the Repairer already see that form."""
    for ctx, marker in ((relu_context, "def scaled_add_kernel"), (fused_context, "scaled_add_ext = load_inline")):
        first = dataclasses.replace(ctx, parent=None, best=None, failure=None)
        assert marker in user_text(Coder().request(first)) and marker not in system_text(Coder().request(first))
    assert "# Worked example" not in user_text(Coder().request(relu_context))  # it has code to start from
    for agent_cls in (Planner, Analyst, Repairer):
        assert "scaled_add" not in system_text(agent_cls().request(relu_context)) + user_text(agent_cls().request(relu_context))


def test_the_system_message_is_the_same_for_every_agent_of_a_run(relu_context):
    """A stable shared prefix (issue 31, point 9): the role, the evidence and the task are in the user message."""
    systems = {system_text(agent_cls().request(relu_context)) for agent_cls in AGENTS}
    assert len(systems) == 1
    for agent_cls in AGENTS:
        assert user_text(agent_cls().request(relu_context)).startswith(f"# Your role: {agent_cls.title}\n")


def test_planner_sees_candidate_verdict_findings_digest_skills_and_answer_format(relu_context):
    request = Planner().request(relu_context)
    text = user_text(request)
    assert "def relu_kernel" in text and "speedup 1.10x" in text
    assert "DRAM throughput 71% of peak" in text  # profile findings
    assert "relu_kernel moves 2 bytes per FLOP" in text  # the Analyst's diagnosis
    assert "DEAD END" in text and "vectorize:vectorized-access" in text  # trajectory digest
    first_skill = relu_context.skills[0]
    assert f"## [{first_skill.name}]" in text and "\n### Steps\n" in text  # skill sections nest under it
    assert '"steps"' in text and '"region"' in text  # the answer format comes last
    assert text.rstrip().endswith("named as it will be).")
    assert text.index("# Reference program") < text.index("# Candidate to improve") < text.index("# Your task")


def test_planner_shows_best_separately_when_the_parent_is_another_candidate(fused_context):
    report = Planner().request(fused_context).metadata["context"]
    assert {"base_code", "best_verdict", "failure"} <= set(report["included"])
    small = dataclasses.replace(fused_context, token_budget=3400)
    report = Planner().request(small).metadata["context"]
    assert "best_code" in report["dropped"]  # the older, lower-priority code goes first
    assert "failure" in report["included"] + report["truncated"]


def test_tiny_budget_keeps_the_failure_and_drops_skills(fused_context):
    for agent_cls in (Planner, Coder):
        ctx = dataclasses.replace(fused_context, token_budget=3500)
        request = agent_cls().request(ctx)
        report = request.metadata["context"]
        assert "failure" in report["included"], agent_cls.name
        assert "failure" in report["truncated"]
        assert not any(name.startswith("skill:") for name in report["included"])
        assert any(name.startswith("skill:") for name in report["dropped"])
        assert request.estimated_input_tokens() <= ctx.token_budget
        failure_block = user_text(request).split("# Latest failure")[1]
        assert "Mask argument cannot be block type" in failure_block  # the first error survives
        assert "FINAL: CompilationError" in failure_block  # and so does the end


def test_a_huge_failure_log_cannot_crowd_out_everything_below_it(fused_context):
    ctx = dataclasses.replace(fused_context, token_budget=6000)
    report = Planner().request(ctx).metadata["context"]
    assert "pre-cut" in report["notes"]["failure"]
    assert "tried" in report["included"]
    assert any(name.startswith("skill:") for name in report["included"])


def test_repairer_requires_and_keeps_code_and_failure_even_when_tight(fused_context):
    ctx = dataclasses.replace(fused_context, token_budget=3000)
    request = Repairer().request(ctx)
    report = request.metadata["context"]
    assert {"task", "base_code", "failure"} <= set(report["included"])
    assert "scaled_add_kernel" in user_text(request)  # the failing code itself, whole
    assert "best_code" not in report["included"]  # it fixes; it does not redesign


def test_repairer_and_analyst_refuse_contexts_without_their_subject(relu_context):
    bare = dataclasses.replace(relu_context, best=None, parent=None)
    with pytest.raises(ValueError, match="failing candidate"):
        Repairer().request(bare)
    with pytest.raises(ValueError, match="measured candidate"):
        Analyst().request(bare)
    quiet = dataclasses.replace(relu_context, failure=None,
                                parent=dataclasses.replace(relu_context.parent, summary=""))
    with pytest.raises(ValueError, match="failure"):
        Repairer().request(quiet)


def test_coder_puts_the_skills_the_plan_cites_ahead_of_others(relu_context):
    skills = relu_context.skills
    assert len(skills) >= 2
    cited = skills[-1].name  # retrieval ranked it last
    plan = Plan(steps=[f"In `relu_kernel`, load 16 bytes per access [{cited}]"], approach_key=f"vectorize:{cited}",
                skill_tags=[cited], rationale="loads are 4-byte")
    ctx = dataclasses.replace(relu_context, plan=plan)
    priorities = {s.name: s.priority for s in Coder().sections(ctx) if s.name.startswith("skill:")}
    assert priorities[f"skill:{cited}"] < min(p for n, p in priorities.items() if n != f"skill:{cited}")
    report = Coder(max_skills=0).request(ctx).metadata["context"]  # no room for uncited skills at all
    assert [n for n in report["included"] if n.startswith("skill:")] == [f"skill:{cited}"]
    assert {"plan", "base_code"} <= set(report["included"])


def test_coder_without_plan_or_code_asks_for_a_first_version(relu_context):
    ctx = dataclasses.replace(relu_context, best=None, parent=None, plan=None)
    text = user_text(Coder().request(ctx))
    assert "first `ModelNew`" in text and "# Plan to carry out" not in text


def test_plan_given_as_text_is_shown(relu_context):
    ctx = dataclasses.replace(relu_context, plan="1. In `relu_kernel`, use BLOCK=4096")
    assert "use BLOCK=4096" in user_text(Coder().request(ctx))


def test_skills_are_whole_or_left_out_lowest_ranked_first(relu_context):
    skills = relu_context.skills
    assert len(skills) >= 3
    text = user_text(Planner().request(relu_context))
    for skill in skills:  # plenty of room: every one whole, in ranking order
        assert skill.body.strip().splitlines()[-1].strip() in text
    assert [text.index(f"## [{s.name}]") for s in skills] == sorted(text.index(f"## [{s.name}]") for s in skills)
    # little room: a prefix of the ranking survives, nothing is cut
    fixed = Planner().request(dataclasses.replace(relu_context, skills=[])).metadata["context"]["used_tokens"]
    tight = dataclasses.replace(relu_context, token_budget=fixed + 900)
    report = Planner().request(tight).metadata["context"]
    kept = [n for n in report["included"] if n.startswith("skill:")]
    assert kept == [f"skill:{s.name}" for s in skills[:len(kept)]] and len(kept) < len(skills)
    assert not [n for n in report["truncated"] if n.startswith("skill:")]
    assert "trimmed to fit" not in user_text(Planner().request(tight))


def test_context_validates_its_input(relu_context):
    with pytest.raises(ValueError, match="backend"):
        dataclasses.replace(relu_context, backend="opencl")
    with pytest.raises(ValueError, match="token_budget"):
        dataclasses.replace(relu_context, token_budget=0)
    with pytest.raises(TypeError, match="CandidateView"):
        dataclasses.replace(relu_context, best={"id": "c1"})
    with pytest.raises(ValueError, match="problem_source"):
        AgentContext(problem_name="x", problem_source="  ")


def test_user_prompt_folder_overrides_a_template_by_name(tmp_path, relu_context):
    (tmp_path / "planner.md.j2").write_text(
        "CUSTOM PLANNER for {{ ctx.problem_name }}\n{{ s.task }}\n{% include 'format_planner.md.j2' %}\n")
    request = Planner(prompt_dirs=[tmp_path]).request(relu_context)
    assert user_text(request).startswith("CUSTOM PLANNER for 19_ReLU")
    assert '"steps"' in user_text(request)  # the built-in partial still resolves
    assert "How every candidate is judged" in system_text(request)  # built-in system prompt
    assert not user_text(Coder(prompt_dirs=[tmp_path]).request(relu_context)).startswith("CUSTOM")


def test_prompt_files_are_read_when_the_agent_is_built(tmp_path, relu_context):
    (tmp_path / "planner.md.j2").write_text("FIRST {{ s.task }}\n{% include 'format_planner.md.j2' %}\n")
    planner = Planner(prompt_dirs=[tmp_path])
    (tmp_path / "planner.md.j2").write_text("EDITED MID-RUN\n")
    (tmp_path / "format_planner.md.j2").write_text("EDITED FORMAT\n")
    text = user_text(planner.request(relu_context))
    assert text.startswith("FIRST") and '"steps"' in text and "EDITED" not in text
    assert user_text(Planner(prompt_dirs=[tmp_path]).request(relu_context)).startswith("EDITED MID-RUN")


def test_bad_prompt_folders_and_templates_fail_when_the_agent_is_built(tmp_path):
    with pytest.raises(PromptTemplateError, match="does not exist"):
        Planner(prompt_dirs=[tmp_path / "missing"])
    (tmp_path / "coder.md.j2").write_text("{% if %}broken")
    with pytest.raises(PromptTemplateError, match="coder.md.j2"):
        Coder(prompt_dirs=[tmp_path])


def test_a_misspelt_variable_in_a_custom_template_is_a_clear_error(tmp_path, relu_context):
    (tmp_path / "analyst.md.j2").write_text("{{ ctx.no_such_field }}")
    with pytest.raises(PromptTemplateError, match="analyst.md.j2"):
        Analyst(prompt_dirs=[tmp_path]).request(relu_context)


def test_retry_request_carries_the_bad_answer_and_the_feedback(relu_context):
    planner = Planner()
    failure = planner.parse("no idea")  # HAND-WRITTEN unusable answer
    assert isinstance(failure, ParseFailure)
    retry = planner.retry_request(relu_context, "no idea", failure)
    assert [m.role for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert retry.messages[-1].content == failure.feedback
    assert retry.metadata["retry_of_parse_failure"] == failure.reason


def test_sampling_settings_can_be_overridden():
    planner = Planner(max_tokens=999, temperature=0.0)
    assert (planner.max_tokens, planner.temperature) == (999, 0.0)
    assert Planner().temperature > Coder().temperature  # plans explore, code is conservative


def test_metadata_is_not_part_of_the_request_hash(relu_context):
    request = Planner().request(relu_context)
    stripped = CompletionRequest(messages=request.messages, role=request.role, max_tokens=request.max_tokens,
                                 temperature=request.temperature)
    assert request.stable_hash("m") == stripped.stable_hash("m")
    assert request.stable_hash("m") == Planner().request(relu_context).stable_hash("m")  # deterministic


def test_candidate_without_speedup_or_findings_renders(relu_context):
    bare = CandidateView(id="c9", code=relu_context.parent.code, status="fail")
    ctx = dataclasses.replace(relu_context, parent=bare, best=None, failure="RuntimeError: boom")
    text = user_text(Analyst().request(ctx))
    assert "Status: fail." in text and "speedup" not in text.split("# Verdict and profile")[1].split("#")[0]


def test_overriding_the_answer_format_changes_prompt_and_feedback_alike(tmp_path, relu_context):
    (tmp_path / "format_planner.md.j2").write_text("ANSWER WITH A JSON OBJECT, CUSTOM FORMAT.\n")
    planner = Planner(prompt_dirs=[tmp_path])
    assert "CUSTOM FORMAT" in user_text(planner.request(relu_context))
    assert "CUSTOM FORMAT" in planner.parse("no plan here").feedback


def test_in_progress_plans_reach_planners_only(relu_context):
    ctx = dataclasses.replace(relu_context, in_progress=["`retune the block sizes`: In `relu_kernel`, use BLOCK=8192"])
    text = user_text(Planner().request(ctx))
    assert "## In progress" in text and "`retune the block sizes`" in text and "choose a different one" in text
    coder = user_text(Coder().request(dataclasses.replace(ctx, plan="1. In `k`, do x")))
    assert "choose a different one" not in coder and "## In progress" not in coder
