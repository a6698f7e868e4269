"""Template autotuning: kernels with declared parameters, hardware-aware pruning, search, a cache,
and the built-in template library that lets `kernelwright optimize` work without an LLM.

    template = load_template("kernel.template.py")          # KW_TUNE + KW_PARAMS, see docs/tuning.md
    report = prune_space(template)                          # feasible configs, pruned ones with reasons
    result = tune(template, JudgeEvaluator(problem_path), strategy="tpe", budget=40)
    best_source = template.instantiate(result.best.params)  # an ordinary candidate

`optimize_without_llm(problem_path)` (tune.autopilot) matches the library, tunes and verifies.
"""
from .cache import TuneCache
from .constraints import ConstraintError, parse_constraint
from .evaluate import JudgeEvaluator, Measurement, TableEvaluator
from .hardware import H100_SXM, DeviceLimits, detect_limits
from .prune import PruneReport, prune_space
from .seeds import SeedCache
from .strategies import TUNE_STRATEGIES, make_tune_strategy
from .template import Template, TemplateError, load_template, parse_template
from .tuner import TuneResult, tune, tune_groupwise
from .verify import verify_default

__all__ = [
    "ConstraintError", "DeviceLimits", "H100_SXM", "JudgeEvaluator", "Measurement", "PruneReport", "SeedCache",
    "TUNE_STRATEGIES",
    "TableEvaluator", "Template", "TemplateError", "TuneCache", "TuneResult", "detect_limits", "load_template",
    "make_tune_strategy", "parse_constraint", "parse_template", "prune_space", "tune", "tune_groupwise", "verify_default",
]
