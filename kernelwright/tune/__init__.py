"""Template autotuning: kernels with declared parameters, hardware-aware pruning, search, a cache,
and the built-in template library that lets `kernelwright optimize` work without an LLM.

    template = load_template("kernel.template.py")          # KW_TUNE + KW_PARAMS, see docs/tuning.md
    report = prune_space(template)                          # feasible configs, pruned ones with reasons
    result = tune(template, JudgeEvaluator(problem_path), strategy="tpe", budget=40)
    best_source = template.instantiate(result.best.params)  # an ordinary candidate

`optimize_without_llm(problem_path)` (tune.autopilot) matches the library, tunes and verifies.
"""
from importlib import import_module

# each public name's module, imported on first use (PEP 562): importing one module of the package
# (the Templatizer's `tune.template`, `tune.budget`) must not load the cache (sqlite3) or the
# hardware limits (the judge's device probe) for the engine's process
_HOMES = {
    "TuneCache": "cache", "ConstraintError": "constraints", "parse_constraint": "constraints",
    "JudgeEvaluator": "evaluate", "Measurement": "evaluate", "TableEvaluator": "evaluate",
    "H100_SXM": "hardware", "DeviceLimits": "hardware", "detect_limits": "hardware",
    "PruneReport": "prune", "prune_space": "prune", "SeedCache": "seeds",
    "TUNE_STRATEGIES": "strategies", "make_tune_strategy": "strategies",
    "Template": "template", "TemplateError": "template", "load_template": "template", "parse_template": "template",
    "TuneResult": "tuner", "tune": "tuner", "tune_groupwise": "tuner", "verify_default": "verify",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value
