"""The tuning loop as an ask/tell object, for callers that measure elsewhere.

`tuner.tune()` drives a strategy with an evaluator in a loop. A caller that cannot block on an
evaluator (the search engine, whose every measurement is an evaluation ask answered by a driver,
possibly after a restart) holds a `TunerState` instead: it prunes the space once, proposes
configurations with `ask()`, and hears each measurement with `tell()`:

    state = TunerState(template, limits=H100_SXM, strategy="auto", budget=8, seed=0,
                       first=[template.defaults])
    while (configs := state.ask()):
        for config in configs:
            state.tell(config, measure(config))
    best = state.result().best

Same semantics as `tune()`: the budget counts evaluations of distinct feasible configurations,
`first` configurations are proposed before the strategy's own and count against the budget,
`auto` resolves to exhaustive when the budget covers the feasible space and TPE otherwise.
Deterministic: the same template, seed and tells give the same asks, so a run rebuilt from its
log of tells asks again exactly what it asked before.
"""
from __future__ import annotations

from typing import Any

from .evaluate import PRUNED, Measurement
from .hardware import DeviceLimits
from .prune import PrunedConfig, PruneReport, check_space, prune_space
from .strategies import TuneStrategy, make_tune_strategy
from .template import Template, config_key
from .tuner import Trial, TuneResult, resolve_strategy


class TunerState:
    def __init__(self, template: Template, *, limits: DeviceLimits, strategy: str = "auto", budget: int | None = None,
                 seed: int = 0, first: list[dict[str, Any]] | None = None, prune: PruneReport | None = None):
        self.template = template
        self.prune = prune or prune_space(template, limits)
        check_space(self.prune)  # an empty space is the template's fault: TemplateError says which constraints
        feasible = self.prune.feasible
        self.budget = len(feasible) if budget is None else max(0, min(budget, len(feasible)))
        self.strategy = resolve_strategy(strategy, self.budget, len(feasible))
        self.trials: list[Trial] = []
        self.outstanding: dict[str, dict[str, Any]] = {}  # config key -> configuration asked, not told
        self._exhausted = False
        self._search: TuneStrategy | None = None
        self._first: list[dict[str, Any]] = []
        if feasible and self.budget:
            self._search = make_tune_strategy(self.strategy, feasible, template.params, seed=seed, budget=self.budget,
                                              categorical=template.categorical)
            keys = {config_key(c) for c in feasible}
            for config in first or []:
                key = config_key(config)
                if key in keys and key not in self._search.proposed:
                    self._search.proposed.add(key)
                    self._first.append(dict(config))

    def pruned_reason(self, config: dict[str, Any]) -> str | None:
        """Why the constraints removed `config` (None when it is feasible)."""
        key = config_key(config)
        return next((p.reason for p in self.prune.pruned if config_key(p.params) == key), None)

    @property
    def asked(self) -> int:
        return len(self.trials) + len(self.outstanding)

    @property
    def done(self) -> bool:
        """Nothing out and nothing more to ask (budget spent or space exhausted)."""
        return not self.outstanding and (self.asked >= self.budget or self._exhausted or self._search is None)

    def ask(self, n: int = 1) -> list[dict[str, Any]]:
        """Up to `n` configurations never asked before, within the budget ([] when none is left)."""
        room = min(n, self.budget - self.asked)
        if self._search is None or room <= 0:
            return []
        batch = self._first[:room]
        self._first = self._first[len(batch):]
        want = room - len(batch)
        if want:
            more = self._search.ask(want)
            self._exhausted = len(more) < want
            batch += more
        for config in batch:
            self.outstanding[config_key(config)] = config
        return batch

    def tell(self, config: dict[str, Any], measurement: Measurement) -> Trial:
        """The measurement of an asked configuration; a failure or a pruned instance tells None."""
        key = config_key(config)
        if key not in self.outstanding:
            raise ValueError(f"configuration {key} was not asked (or was told already)")
        del self.outstanding[key]
        if self._search is not None:
            self._search.tell(config, measurement.value)
        if measurement.status == PRUNED:
            self.prune.after_compile.append(PrunedConfig(dict(config), measurement.error or "", stage="compiled"))
        trial = Trial(len(self.trials), measurement)
        self.trials.append(trial)
        return trial

    def result(self) -> TuneResult:
        return TuneResult(self.template.name, self.template.hash, self.strategy, self.budget, self.prune,
                          list(self.trials))
