"""The tuning loop: prune the space, then ask a strategy, evaluate, tell, until the budget is spent.

The budget counts evaluations: distinct feasible configurations measured (a cache hit counts too,
so a strategy's result does not depend on what an earlier run left in the cache). Configurations
pruned before compiling cost nothing. `first` configurations (the template's defaults, say) are
measured before the strategy starts and count against the budget. `known` measurements (of this
template, made earlier in the same tuning) are told to the strategy and never measured again.
Each result carries its cost (tune.cost): evaluations, fresh and cached, and the seconds spent.
`max_runs` bounds the judge evaluations instead (or as well): an evaluator that measures a batch
in fewer evaluations than configurations (a sweep, tune/sweep_eval.py: a batch of N costs two)
then measures many configurations per evaluation, and the loop stops before a batch it cannot pay.
`stop()`, when given, is asked before each batch of evaluations: a time limit or a fatal error
ends the loop between instances. `seeds` (tune/seeds.py), when given, puts the fastest
configurations measured earlier for the same template family, device and (nearest) shape right
after `first`, and records every batch measured here.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .cost import TuneCost, step_cost
from .evaluate import Evaluator, Measurement, runs_for
from .hardware import DeviceLimits
from .prune import PrunedConfig, PruneReport, prune_space
from .seeds import SeedCache
from .strategies import make_tune_strategy
from .template import Template, TemplateError, config_key

SEEDS = 4  # most configurations seeded from earlier tunings (and at most a quarter of the budget)


@dataclass
class Trial:
    index: int
    measurement: Measurement

    @property
    def params(self) -> dict[str, Any]:
        return self.measurement.params


@dataclass
class TuneResult:
    template_name: str
    template_hash: str
    strategy: str
    budget: int
    prune: PruneReport
    trials: list[Trial] = field(default_factory=list)
    cost: TuneCost = field(default_factory=TuneCost)

    @property
    def best(self) -> Trial | None:
        passed = [t for t in self.trials if t.measurement.ok]
        return min(passed, key=lambda t: t.measurement.time_ms) if passed else None

    def best_so_far(self) -> list[float | None]:
        """Best time after each evaluation (None until one passed): the curve strategies are compared by."""
        curve, best = [], None
        for trial in self.trials:
            value = trial.measurement.value
            if value is not None and (best is None or value < best):
                best = value
            curve.append(best)
        return curve

    def to_dict(self) -> dict[str, Any]:
        return {
            "template": self.template_name, "template_hash": self.template_hash, "strategy": self.strategy,
            "budget": self.budget, "space": self.prune.total, "feasible": len(self.prune.feasible),
            "pruned": [{"params": p.params, "reason": p.reason, "stage": p.stage}
                       for p in self.prune.pruned + self.prune.after_compile],
            "implicit_constraints": self.prune.implicit,
            "trials": [{"index": t.index, **_trial_row(t.measurement)} for t in self.trials],
            "best": _trial_row(self.best.measurement) if self.best else None,
            "cost": self.cost.to_dict(),
        }


def _trial_row(m: Measurement) -> dict[str, Any]:
    return {"params": m.params, "status": m.status, "time_ms": m.time_ms, "method": m.method,
            "note": m.note, "error": m.error, "cached": m.cached, "device_s": m.device_s, "judge_s": m.judge_s}


def tune(
    template: Template,
    evaluator: Evaluator,
    *,
    strategy: str = "exhaustive",
    budget: int | None = None,
    limits: DeviceLimits | None = None,
    seed: int = 0,
    batch: int = 1,
    first: list[dict[str, Any]] | None = None,
    prune: PruneReport | None = None,
    on_result: Callable[[Trial], None] | None = None,
    stop: Callable[[], bool] | None = None,
    known: dict[str, Measurement] | None = None,
    max_runs: int | None = None,
    seeds: SeedCache | None = None,
) -> TuneResult:
    """Search `template`'s space with `strategy`, measuring through `evaluator`, within `budget`
    configurations and `max_runs` judge evaluations (None: no bound), starting from `first` and
    from what `seeds` knows of this template."""
    started = time.monotonic()
    report = prune or prune_space(template, limits)
    feasible = report.feasible
    feasible_keys = {config_key(c) for c in feasible}
    told = [m for key, m in (known or {}).items() if key in feasible_keys]
    budget = len(feasible) - len(told) if budget is None else max(0, min(budget, len(feasible) - len(told)))
    strategy = resolve_strategy(strategy, budget, len(feasible) - len(told))
    result = TuneResult(template.name, template.hash, strategy, budget, report)
    result.cost = TuneCost(device=getattr(evaluator, "device", ""), pruned_before=len(report.pruned))
    if not feasible or budget == 0:
        return result
    search = make_tune_strategy(strategy, feasible, template.params, seed=seed, budget=budget,
                                categorical=template.categorical)
    for m in told:  # measured earlier in this tuning: information for the strategy, no evaluation
        search.proposed.add(config_key(m.params))
        search.tell(m.params, m.value)
    done = {config_key(m.params) for m in told}
    device = getattr(evaluator, "device", "")
    starts = list(first or []) + seeded_configs(template, seeds, device, budget)
    seeded = []
    for config in starts:
        key = config_key(config)
        if key in feasible_keys and key not in done and len(seeded) < budget:
            done.add(key)
            seeded.append(config)
            search.proposed.add(key)
    pending = list(seeded)
    runs = 0
    while len(result.trials) < budget and not (stop is not None and stop()):
        take = min(max(1, batch), budget - len(result.trials))
        if max_runs is not None:  # no batch the evaluations left cannot pay for
            while take > 0 and runs_for(evaluator, take) > max_runs - runs:
                take -= 1
            if take == 0:
                break
        asked, pending = pending[:take], pending[take:]  # seeded configurations first, in the same batch
        if len(asked) < take:
            asked += search.ask(take - len(asked))
        if not asked:
            break
        measured = evaluator.evaluate(template, asked)
        for measurement in measured:
            runs += 0 if measurement.cached else measurement.runs
            search.tell(measurement.params, measurement.value)
            trial = Trial(len(result.trials), measurement)
            result.trials.append(trial)
            if on_result is not None:
                on_result(trial)
        if seeds is not None:
            seeds.record(template, device, measured)
    for item in result.trials:  # configs pruned after compiling join the prune report
        if item.measurement.status == "pruned":
            report.after_compile.append(PrunedConfig(item.params, item.measurement.error or "", stage="compiled"))
    result.cost = step_cost([t.measurement for t in result.trials], device=result.cost.device,
                            wall_s=time.monotonic() - started, pruned_before=len(report.pruned))
    return result


def seeded_configs(template: Template, seeds: SeedCache | None, device: str, budget: int) -> list[dict[str, Any]]:
    """The configurations `seeds` holds for this template, best first, each moved into the
    template's current space (a value outside a restricted domain takes the template's default:
    a kernel tuned in turn gets the seeds' values of its own parameters), at most SEEDS and a
    quarter of the budget."""
    if seeds is None or budget <= 1:
        return []
    return fit_seeds(template, seeds.lookup(template, device, limit=seed_limit(budget)))


def seed_limit(budget: int) -> int:
    """How many seeds a tuning of `budget` configurations starts with: at most SEEDS, a quarter of it."""
    return min(SEEDS, max(1, budget // 4))


def fit_seeds(template: Template, configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seeded configurations moved into the template's current space (see `seeded_configs`)."""
    found = []
    for config in configs:
        try:
            found.append(template.complete({k: v for k, v in config.items()
                                             if v in template.params.get(k, ())}))
        except TemplateError:
            continue
    return found


def resolve_strategy(strategy: str, budget: int, feasible: int) -> str:
    """`auto`: every configuration when the budget covers the space, else TPE (random search
    when optuna is missing). Any other name is returned as given."""
    if strategy != "auto":
        return strategy
    if budget >= feasible:
        return "exhaustive"
    try:
        import optuna  # noqa: PLC0415,F401 -- optuna is heavy to import (0.4 s: sqlalchemy, alembic) and tune/ is imported by the agents and the search: loaded when a TPE/CMA-ES/GP strategy is made; without it the strategy falls back to random
    except ImportError:
        return "random"
    return "tpe"


def tune_groupwise(
    template: Template,
    evaluator: Evaluator,
    *,
    strategy: str = "exhaustive",
    budget: int | None = None,
    limits: DeviceLimits | None = None,
    seed: int = 0,
    batch: int = 1,
    first: list[dict[str, Any]] | None = None,
    on_result: Callable[[Trial], None] | None = None,
    stop: Callable[[], bool] | None = None,
    max_runs: int | None = None,
    seeds: SeedCache | None = None,
) -> TuneResult:
    """Tune a multi-kernel template one kernel at a time (the others held at their best so far).

    The kernels of a library template run one after another, so their times add up and their
    parameters barely interact: searching each kernel's space in turn costs the sum of the
    spaces instead of their product. The budget is shared in proportion to the spaces. A kernel's
    search starts knowing the instance measured last (its own parameters at their values so far),
    which is not measured again. `max_runs` (judge evaluations) is shared the same way.
    """
    started = time.monotonic()
    prefixes = template.groups
    if len(prefixes) == 1:
        return tune(template, evaluator, strategy=strategy, budget=budget, limits=limits, seed=seed,
                    batch=batch, first=first, on_result=on_result, stop=stop, max_runs=max_runs, seeds=seeds)
    best = dict(template.defaults)
    free = {p: [n for n in template.params if n.startswith(p)] for p in prefixes}
    reports = {p: prune_space(_pinned(template, free[p], best), limits) for p in prefixes}
    sizes = {p: len(r.feasible) for p, r in reports.items()}
    total = sum(sizes.values())
    budget = total if budget is None else max(0, min(budget, total))
    merged = PruneReport(pruned=[x for r in reports.values() for x in r.pruned],
                         feasible=[c for r in reports.values() for c in r.feasible],
                         implicit=sorted({c for r in reports.values() for c in r.implicit}),
                         limits=next(iter(reports.values())).limits)
    result = TuneResult(template.name, template.hash, strategy, budget, merged)
    result.cost = TuneCost(device=getattr(evaluator, "device", ""))
    known: dict[str, Measurement] = {}
    left = budget
    runs_left = max_runs
    for i, prefix in enumerate(prefixes):
        if stop is not None and stop():
            break
        share = left if i == len(prefixes) - 1 else min(left, max(1, round(budget * sizes[prefix] / max(1, total))))
        sub = _pinned(template, free[prefix], best)

        def forward(trial: Trial, offset=len(result.trials)) -> None:  # noqa: B008 -- binds the count now, on purpose
            moved = Trial(offset + trial.index, trial.measurement)
            result.trials.append(moved)
            if on_result is not None:
                on_result(moved)

        runs = None if max_runs is None else runs_left if i == len(prefixes) - 1 else \
            min(runs_left, max(runs_for(evaluator, 2), round(max_runs * sizes[prefix] / max(1, total))))
        part = tune(sub, evaluator, strategy=strategy, budget=share, limits=limits, seed=seed, batch=batch,
                    first=first if i == 0 else None, on_result=forward, stop=stop, known=known, max_runs=runs,
                    seeds=seeds)
        runs_left = None if max_runs is None else runs_left - part.cost.judge_runs
        left -= len(part.trials)
        merged.after_compile.extend(part.prune.after_compile)
        result.cost = result.cost.add(part.cost)
        known.update({config_key(t.params): t.measurement for t in part.trials})
        if result.best is not None:  # the best so far over every kernel's search (a whole configuration)
            best = dict(result.best.params)
    result.cost.wall_s = time.monotonic() - started
    return result


def _pinned(template: Template, free: list[str], values: dict[str, Any]) -> Template:
    return template.restrict(fixed={n: values[n] for n in template.params if n not in free})
