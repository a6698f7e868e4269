"""Search strategies over a template's feasible configurations, as ask/tell objects.

`ask(n)` proposes up to n configurations never proposed before (an empty list: nothing left);
`tell(config, value)` reports the measured time in ms (lower is better) or None for a failure.
Strategies never evaluate anything themselves, so the same code runs against the judge, against
an in-process timer on a GPU, or against a table measured earlier (tune_replay).

- exhaustive: every feasible configuration in declaration order.
- random: a seeded permutation (sampling without replacement).
- tpe / cmaes / gp: optuna samplers. Numeric parameters are encoded as the index into their sorted
  values (an ordinal the samplers can model as an integer), other values, and parameters the
  template declares categorical (a `choice`, or a grid/precision/algorithm kind), as categories. Proposals
  that are infeasible or already measured are told to the sampler (a failure, or the known value)
  and replaced by the nearest feasible configuration not measured yet, so every ask makes
  progress where the sampler wanted to look.
"""
from __future__ import annotations

import contextlib
import math
import random
import warnings
from typing import Any

from .template import config_key

TUNE_STRATEGIES = ("exhaustive", "random", "tpe", "cmaes", "gp")
CHOICES = ("auto",) + TUNE_STRATEGIES  # auto: exhaustive when the budget covers the space, else tpe (tuner.py)


class TuneStrategy:
    """Base: the bookkeeping of what was proposed and measured."""

    name = "base"

    def __init__(self, configs: list[dict[str, Any]], seed: int = 0):
        if not configs:
            raise ValueError("no feasible configuration to search")
        self.configs = list(configs)
        self.seed = seed
        self.proposed: set[str] = set()
        self.values: dict[str, float | None] = {}

    @property
    def remaining(self) -> int:
        return len(self.configs) - len(self.proposed)

    def ask(self, n: int = 1) -> list[dict[str, Any]]:
        raise NotImplementedError

    def tell(self, config: dict[str, Any], value: float | None) -> None:
        self.values[config_key(config)] = value


class OrderedStrategy(TuneStrategy):
    """Walks a fixed order of the configurations (exhaustive, random)."""

    def __init__(self, configs, seed: int = 0, order: list[int] | None = None):
        super().__init__(configs, seed)
        self.order = order if order is not None else list(range(len(self.configs)))
        self.cursor = 0

    def ask(self, n: int = 1) -> list[dict[str, Any]]:
        batch = []
        while len(batch) < n and self.cursor < len(self.order):
            config = self.configs[self.order[self.cursor]]
            self.cursor += 1
            key = config_key(config)
            if key not in self.proposed:
                self.proposed.add(key)
                batch.append(config)
        return batch


class Exhaustive(OrderedStrategy):
    name = "exhaustive"


class RandomSearch(OrderedStrategy):
    name = "random"

    def __init__(self, configs, seed: int = 0):
        order = list(range(len(configs)))
        random.Random(seed).shuffle(order)
        super().__init__(configs, seed, order)


class OptunaStrategy(TuneStrategy):
    """An optuna sampler driven through study.ask()/study.tell() on the encoded space."""

    def __init__(self, configs, params: dict[str, tuple], sampler: str, seed: int = 0, budget: int | None = None,
                 categorical: set[str] | frozenset[str] = frozenset()):
        super().__init__(configs, seed)
        import optuna  # noqa: PLC0415 -- optuna is heavy to import (0.4 s: sqlalchemy, alembic) and tune/ is imported by the agents and the search: loaded when a TPE/CMA-ES/GP strategy is made

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.name = sampler
        self.optuna = optuna
        self.params = {k: tuple(v) for k, v in params.items()}
        self.ordinal = {k for k, v in self.params.items() if _is_numeric(v) and k not in categorical}
        self.feasible = {config_key(c) for c in self.configs}
        self.distributions = {k: _distribution(optuna, v, k in self.ordinal) for k, v in self.params.items()}
        self.study = optuna.create_study(direction="minimize", sampler=_make_sampler(optuna, sampler, seed, budget))
        self.trials: dict[str, Any] = {}  # config key -> open optuna trial
        self.rng = random.Random(seed)

    def ask(self, n: int = 1) -> list[dict[str, Any]]:
        with _few_threads(self.name == "gp"):
            return self._ask(n)

    def _ask(self, n: int) -> list[dict[str, Any]]:
        batch: list[dict[str, Any]] = []
        while len(batch) < n and self.remaining > 0:
            trial = self.study.ask(self.distributions)
            config = self._decode(trial.params)
            key = config_key(config)
            if key in self.feasible and key not in self.proposed:
                self.proposed.add(key)
                self.trials[key] = trial
                batch.append(config)
                continue
            known = self.values.get(key)
            if known is not None:  # a measured configuration: its value is still information
                self.study.tell(trial, self._encode_value(known))
            else:  # infeasible, or proposed and not measured yet
                self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            batch.append(self._nearest_unproposed(config))
        return batch

    def tell(self, config: dict[str, Any], value: float | None) -> None:
        super().tell(config, value)
        key = config_key(config)
        trial = self.trials.pop(key, None)
        encoded = self._encode_value(value)
        if trial is not None:
            if encoded is None:
                self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
            else:
                self.study.tell(trial, encoded)
        elif encoded is not None:  # a repaired proposal: still teach the sampler
            self.study.add_trial(self.optuna.trial.create_trial(
                params=self._encode(config), distributions=self.distributions, value=encoded))

    def _nearest_unproposed(self, target: dict[str, Any]) -> dict[str, Any]:
        """The unmeasured feasible configuration closest to a proposal that cannot be used as is
        (ordinal distance per numeric parameter, 1 per differing category; ties broken at random),
        so every ask makes progress where the sampler wanted to look."""
        left = [c for c in self.configs if config_key(c) not in self.proposed]
        distances = [self._distance(c, target) for c in left]
        nearest = min(distances)
        config = self.rng.choice([c for c, d in zip(left, distances, strict=False) if d == nearest])
        self.proposed.add(config_key(config))
        return config

    def _distance(self, a: dict[str, Any], b: dict[str, Any]) -> float:
        total = 0.0
        for name, values in self.params.items():
            if name in self.ordinal:
                order = _ordered(values)
                total += abs(order.index(a[name]) - order.index(b[name])) / max(1, len(order) - 1)
            else:
                total += 0.0 if a[name] == b[name] else 1.0
        return total

    def _encode_value(self, value: float | None) -> float | None:
        """log(time): scale-free. A failure scores worse than anything seen (else it is unknown)."""
        if value is not None and value > 0 and math.isfinite(value):
            return math.log(value)
        seen = [math.log(v) for v in self.values.values() if v is not None and v > 0 and math.isfinite(v)]
        return max(seen) + math.log(4.0) if seen else None

    def _decode(self, raw: dict[str, Any]) -> dict[str, Any]:
        config = {}
        for name, values in self.params.items():
            value = raw[name]
            config[name] = _ordered(values)[value] if name in self.ordinal else value
        return config

    def _encode(self, config: dict[str, Any]) -> dict[str, Any]:
        return {name: (_ordered(values).index(config[name]) if name in self.ordinal else config[name])
                for name, values in self.params.items()}


@contextlib.contextmanager
def _few_threads(active: bool):
    """One torch thread while the GP sampler fits its model: its tensors are tiny, and on a
    shared machine extra threads only contend (measured: 7x slower with 2 threads under load)."""
    if not active:
        yield
        return
    import torch  # noqa: PLC0415 -- tune/ stays torch-free at import: the agents and the search import it (tune/__init__.py)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _is_numeric(values: tuple) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _ordered(values: tuple) -> list:
    return sorted(values)


def _distribution(optuna, values: tuple, ordinal: bool):
    if ordinal:
        return optuna.distributions.IntDistribution(0, len(values) - 1)
    return optuna.distributions.CategoricalDistribution(list(values))


def _startup(budget: int | None) -> int:
    """Random trials before the model kicks in: a quarter of the budget, between 2 and 10."""
    return 10 if budget is None else max(2, min(10, budget // 4))


def _make_sampler(optuna, name: str, seed: int, budget: int | None):
    with warnings.catch_warnings():  # options marked experimental or renamed across optuna versions
        warnings.simplefilter("ignore")
        return _sampler(optuna, name, seed, budget)


def _sampler(optuna, name: str, seed: int, budget: int | None):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=_startup(budget), multivariate=True,
                                          warn_independent_sampling=False)
    if name == "cmaes":
        try:
            import cmaes  # noqa: PLC0415,F401 -- cmaes is optional for optuna: its absence is a clear error; optuna's CMA-ES needs this package
        except ImportError:
            raise ValueError("the cmaes strategy needs the `cmaes` package: pip install cmaes") from None
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=_startup(budget), with_margin=True,
                                            warn_independent_sampling=False)
    if name == "gp":
        try:
            import scipy  # noqa: PLC0415,F401 -- scipy is optional for optuna: its absence is a clear error; optuna's GP sampler optimises its acquisition with scipy
        except ImportError:
            raise ValueError("the gp strategy needs scipy: pip install scipy") from None
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=_startup(budget), deterministic_objective=True,
                                         warn_independent_sampling=False)
    raise ValueError(f"unknown optuna sampler {name!r}")


def make_tune_strategy(name: str, configs: list[dict[str, Any]], params: dict[str, tuple],
                       seed: int = 0, budget: int | None = None,
                       categorical: set[str] | frozenset[str] = frozenset()) -> TuneStrategy:
    """A strategy by name (see STRATEGIES) over the feasible `configs` of a space `params`;
    `categorical` names numeric parameters whose values have no order (Template.categorical)."""
    if name == "exhaustive":
        return Exhaustive(configs, seed)
    if name == "random":
        return RandomSearch(configs, seed)
    if name in ("tpe", "cmaes", "gp"):
        try:
            import optuna  # noqa: PLC0415,F401 -- optuna is heavy to import (0.4 s: sqlalchemy, alembic) and tune/ is imported by the agents and the search: loaded when a TPE/CMA-ES/GP strategy is made; its absence is a clear error
        except ImportError:
            raise ValueError(f"the {name} strategy needs optuna (pip install optuna); "
                             "exhaustive and random need nothing") from None
        return OptunaStrategy(configs, params, name, seed, budget, categorical)
    raise ValueError(f"unknown strategy {name!r}; choose one of {', '.join(TUNE_STRATEGIES)}")
