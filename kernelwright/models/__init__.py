"""A user's model, not a benchmark problem: find its hot submodules, write them as KernelBench
problems (`extract`), and put the optimized `ModelNew`s back into the model, verified and timed end
to end (`apply`). docs/models.md says what each step does and what it cannot do."""
from .spec import ModelSpecError, build_model, load_callable

__all__ = ["ModelSpecError", "build_model", "load_callable"]
