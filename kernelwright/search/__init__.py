"""The optimization engine: a pure ask/tell core, strategies, and drivers at the edge.

    from kernelwright.search import Engine, Limits, ProblemInfo, Settings
    engine = Engine(info, "mcts", Limits(max_calls=40), Settings())
    for ask in engine.ask(): ...; engine.tell(ask.id, result, elapsed_s)

A whole run (store, resume, exchange, batch): kernelwright.search.drivers.modes.run_optimization.
See docs/optimize.md.
"""
from .asks import (Answer, Ask, CompletionAsk, EvaluationAsk, SeedsAsk, SweepAsk, ask_from_dict, result_from_dict,
                   result_to_dict)
from .budget import Limits
from .core import Engine, EngineError
from .problem_info import ProblemInfo
from .results import AskFailure, EvalResult, SeedsResult, SweepOutcome
from .settings import Settings, SettingsError

__all__ = [
    "Answer", "Ask", "AskFailure", "CompletionAsk", "Engine", "EngineError", "EvalResult", "EvaluationAsk",
    "Limits", "ProblemInfo", "SeedsAsk", "SeedsResult", "Settings", "SettingsError", "SweepAsk", "SweepOutcome",
    "ask_from_dict", "result_from_dict", "result_to_dict",
]
