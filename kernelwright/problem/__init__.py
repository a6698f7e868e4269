"""Problems (KernelBench format) and candidates: loading, size overrides, CPU shrink, inputs, ops."""
from .errors import ProblemError
from .loader import Problem, check_signatures, load_candidate, load_problem, parse_override

__all__ = ["Problem", "ProblemError", "check_signatures", "load_candidate", "load_problem", "parse_override"]
