"""The rule sets as text: the prompt's "How every candidate is judged", docs/judge.md's rules
section, and the one-line form for headers and tables. Everything is rendered from `sets`, so the
model, the docs and the report say the same thing."""
from __future__ import annotations

from .sets import NAMES, RULE_SETS, RuleSet, all_rules, get

DOCS_BEGIN = "<!-- rules:begin (rendered by `python -m kernelwright.rules --docs docs/judge.md`; do not edit) -->"
DOCS_END = "<!-- rules:end -->"


def prompt_markdown(name: str | None = None, tolerances: str = "") -> str:
    """The section every agent's system prompt carries: the rule set's rules as a numbered list."""
    rule_set = get(name)
    fill = f" ({tolerances})" if tolerances else ""
    lines = ["# How every candidate is judged", "",
             f"Rule set: `{rule_set.name}` ({rule_set.summary}). The reference defines `Model`, `get_inputs()` "
             "and `get_init_inputs()`; a candidate is a complete Python module defining `class ModelNew(nn.Module)`, "
             "judged in a fresh process:", ""]
    for number, rule in enumerate(rule_set.rules, start=1):
        lines.append(f"{number}. {rule.title[0].upper() + rule.title[1:]}: {rule.text.replace('{tolerances}', fill)}")
    return "\n".join(lines) + "\n"


def header_line(name: str | None) -> str:
    """`kernelbench (KernelBench-compatible: ...)` for evidence headers and run summaries."""
    rule_set = get(name)
    return f"{rule_set.name} ({rule_set.summary})"


def _membership(rule_id: str) -> str:
    return ", ".join(f"`{n}`" for n in NAMES if any(r.id == rule_id for r in RULE_SETS[n].rules))


def docs_markdown() -> str:
    """docs/judge.md's "Rule sets" section: the sets, then every rule with the checks behind it."""
    lines = ["| rule set | what it allows |", "|---|---|"]
    lines += [f"| `{s.name}` | {s.summary} |" for s in RULE_SETS.values()]
    lines += ["", "| rule | in | checks | what the model reads |", "|---|---|---|---|"]
    for rule in all_rules():
        checks = ", ".join(f"`{c}`" for c in rule.checks)
        text = rule.text.replace("{tolerances}", "").replace("|", "\\|")
        lines.append(f"| `{rule.id}` | {_membership(rule.id)} | {checks} | {text} |")
    return "\n".join(lines) + "\n"


def replace_docs_section(document: str) -> str:
    """`document` with the text between the rules markers replaced by `docs_markdown()`."""
    start, end = document.find(DOCS_BEGIN), document.find(DOCS_END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {DOCS_BEGIN!r} ... {DOCS_END!r} section")
    return document[:start] + DOCS_BEGIN + "\n" + docs_markdown() + document[end:]


def describe(rule_set: RuleSet) -> str:
    """Plain text of one rule set, for `kernelwright rules` style listings."""
    body = "\n".join(f"- {r.id}: {r.text.replace('{tolerances}', '')}" for r in rule_set.rules)
    return f"{rule_set.name}: {rule_set.summary}\n{body}\n"
