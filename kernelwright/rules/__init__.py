"""Named rule sets (`kernelbench`, `library`, `strict`): what a candidate may do, as data.

The lowest layer of the package (standard library only): the judge enforces these rules, the
agents' prompts and docs/judge.md are rendered from them, and verdicts, runs and reports record
which set was used. See `sets` for the definitions and `render` for the texts.
"""
from .render import docs_markdown, header_line, prompt_markdown
from .sets import DEFAULT, NAMES, RULE_SETS, Rule, RuleSet, UnknownRuleSet, all_rules, from_legacy_policy, get

__all__ = ["DEFAULT", "NAMES", "RULE_SETS", "Rule", "RuleSet", "UnknownRuleSet", "all_rules", "docs_markdown",
           "from_legacy_policy", "get", "header_line", "prompt_markdown"]
