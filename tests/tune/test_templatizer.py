"""The Templatizer agent: a pure prompt builder and an answer parser returning a Template."""
from kernelwright.agents import AgentContext, CandidateView, ParseFailure
from kernelwright.agents.templatizer import Templatizer
from kernelwright.tune.template import Template

from .test_verify import FAITHFUL, ORIGINAL

REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 50)]

def get_init_inputs():
    return []
'''


def context(**extra):
    kernel = CandidateView(id="c7", code=ORIGINAL, status="pass", speedup=1.3, summary="passed 5 trials")
    return AgentContext(problem_name="relu", problem_source=REFERENCE, best=kernel, **extra)


def test_prompt_shows_the_kernel_and_the_format():
    messages = Templatizer().render(context())
    user = messages[1].content
    assert "# Your role: Templatizer" in user and "template" in user
    assert "Templatizer" not in messages[0].content  # the system message is shared by every agent
    assert "relu_kernel" in user and "KW_TUNE" in user and "KW_PARAMS" in user
    assert "Reference program" in user
    request = Templatizer().request(context())
    assert request.role == "templatizer" and request.temperature == 0.0


def test_retry_after_failed_verification_shows_why():
    user = Templatizer().render(context(failure="default instance: output differs (max abs error 0.5)"))[1].content
    assert "max abs error 0.5" in user and "did not behave like the original" in user


# hand-written model answers
GOOD_ANSWER = f"Here is the template.\n\n```python\n{FAITHFUL}```\n"
NO_DEFAULTS = GOOD_ANSWER.replace('"defaults": {"BLOCK": 128, "num_warps": 4},', '"defaults": {"BLOCK": 128},')


def test_parse_returns_a_template():
    template = Templatizer().parse(GOOD_ANSWER)
    assert isinstance(template, Template)
    assert template.params == {"BLOCK": (64, 128, 256), "num_warps": (1, 2, 4)}
    assert template.defaults == {"BLOCK": 128, "num_warps": 4}


def test_parse_failures_carry_feedback():
    agent = Templatizer()
    for answer, words in [(NO_DEFAULTS, "num_warps"), ("no code at all", "code"),
                          (f"```python\n{ORIGINAL}```", "KW_TUNE")]:
        failure = agent.parse(answer)
        assert isinstance(failure, ParseFailure), answer
        assert words in failure.reason and "KW_TUNE" in failure.feedback


def test_the_prompt_is_complete_and_sizes_the_space_to_the_budget():
    """Issue 31, point 8: the `sizes` format, what constraints may contain, when parameters are read,
    how configurations are chosen, what autotune's winner means, and one consistent rule about size."""
    user = Templatizer().render(context(extra={"tune_budget": 3, "tune_match": 1.25}))[1].content
    assert '`sizes` (optional) names the problem\'s sizes' in user and '{"N": 4096, "K": 8192}' in user
    assert "`and`, `or`, `not`, `a if c else b`" in user and "`in` / `not in` a literal list" in user
    assert "reading `KW_PARAMS` at import, in `__init__` or in `forward` sees the same values" in user
    assert "the tuner judges the defaults first" in user and "the fastest correct one replaces the candidate" in user
    assert "It judges at most 3 configurations in all" in user and "3 to 6 values" not in user
    assert "within\n1.25x of the candidate's time" in user or "within 1.25x of the candidate's time" in user
    assert "Which config\nit picked for these sizes is not recorded" in user


def test_the_format_example_is_a_template_the_parser_accepts():
    import re

    from kernelwright.agents.templates import BUILTIN_PROMPTS
    from kernelwright.tune.template import parse_template

    text = (BUILTIN_PROMPTS / "format_templatizer.md.j2").read_text()
    declaration = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    template = parse_template(ORIGINAL.replace("BLOCK=128", 'BLOCK=KW_PARAMS["BLOCK_M"]') + declaration, name="x")
    assert template.sizes == {"N": 4096, "K": 8192} and len(template.constraints) == 3  # two, and SPLIT_K's `when`
    assert template.defaults == {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "GROUP_M": 8,
                                 "SPLIT_K": 1}
    assert template.kinds()["SPLIT_K"] == "split" and "GROUP_M" in template.categorical


def test_the_prompt_asks_for_layout_and_algorithm_choices_with_the_codes_vocabulary():
    """Issue 33, point 2: the kinds autotune cannot reach, named from tune.params; the limit names
    and functions from the parser's own tables (NUM_SMS included), in the prompt and in a parse
    failure's feedback alike."""
    from kernelwright.tune.params import PARAM_KINDS

    user = Templatizer().render(context())[1].content
    for kind in ("order", "split", "stages", "vector", "grid", "precision", "algorithm"):
        assert f"- `{kind}`: {PARAM_KINDS[kind]}" in user
    assert "NUM_SMS, CC, L2_BYTES" in user and "cdiv, next_pow2, is_pow2" in user
    assert '"when"' in user and '"choice"' in user and "autotune` over block sizes cannot reach" in user
    failure = Templatizer().parse(NO_DEFAULTS)
    assert "NUM_SMS" in failure.feedback and '"choice"' in failure.feedback


def test_the_prompt_states_the_sweep_budget_as_the_tuner_counts_it():
    """How configurations are chosen (sweeps, the winner judged in full) and what the budget buys,
    in numbers computed by tune.budget, never written in the prompt."""
    from kernelwright.tune.budget import TuneBudget

    plan = TuneBudget(evaluations=7, sweep=12)
    user = Templatizer().render(context(extra={"tune_budget": 7, "tune_sweep": 12}))[1].content
    assert "measures configurations in sweeps" in user and "up to 12 instances" in user
    assert "judged in full" in user and "only a fully judged instance can replace" in user
    assert f"The budget is 7 evaluations: about {plan.configurations} configurations" in user
    assert plan.configurations == 3 * 12 + 1 and f"about {plan.space} at most" in user
    single = Templatizer().render(context(extra={"tune_budget": 5}))[1].content
    assert "It judges at most 5 configurations in all" in single and "sweeps" not in single
    assert f"about {TuneBudget(5).space} at most" in single
