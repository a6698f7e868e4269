"""Compare search strategies offline, against a space measured exhaustively once.

A sweep (bench/tune_gpu.py) times every feasible configuration of a template on the GPU and saves
the table. Replaying a strategy against the table runs the very tuning loop of a real run (same
strategies, same budget accounting) with the table as evaluator, so the share of the exhaustive
optimum a strategy reaches after k evaluations can be averaged over many seeds in seconds, on a
machine without a GPU (and with optuna, which GPU machines may lack).
"""
from __future__ import annotations

import itertools
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .evaluate import TableEvaluator
from .prune import PruneReport
from .template import Template, config_key, parse_template
from .tuner import tune


@dataclass
class Sweep:
    name: str
    template: Template
    table: dict[str, dict[str, Any]]  # config_key -> {"status", "time_ms", "params", ...}
    configs: list[dict[str, Any]]  # the measured configurations, in the order they were measured
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def optimum_ms(self) -> float | None:
        times = [r["time_ms"] for r in self.table.values() if r.get("status") == "pass" and r.get("time_ms")]
        return min(times) if times else None


def load_sweep(path: str | Path) -> Sweep:
    data = json.loads(Path(path).read_text())
    template = parse_template(data["template_source"], name=data.get("name", "sweep"))
    if data.get("domains"):
        template = template.restrict(domains=data["domains"])
    table = data["table"]
    configs = [row["params"] for row in table.values()]
    extra = {k: v for k, v in data.items() if k not in ("template_source", "table")}
    return Sweep(data.get("name", Path(path).stem), template, table, configs, bool(data.get("truncated")), extra)


def replay_once(sweep: Sweep, strategy: str, budget: int, seed: int) -> float:
    """Share of the optimum (optimum time / best time found) after `budget` evaluations; 0 if none passed."""
    # the table's order is declaration order restricted to what was measured: exhaustive walks it as written
    order = {config_key(c): i for i, c in enumerate(_declared_order(sweep))}
    feasible = sorted(sweep.configs, key=lambda c: order.get(config_key(c), len(order)))
    report = PruneReport(feasible=feasible)
    result = tune(sweep.template, TableEvaluator(sweep.table), strategy=strategy, budget=budget, prune=report,
                  seed=seed)
    best = result.best
    optimum = sweep.optimum_ms
    if best is None or optimum is None:
        return 0.0
    return optimum / best.measurement.time_ms


def _declared_order(sweep: Sweep) -> list[dict[str, Any]]:
    names = list(sweep.template.params)
    return [dict(zip(names, values, strict=False)) for values in itertools.product(*sweep.template.params.values())]


@dataclass
class ShareStats:
    strategy: str
    fraction: float
    budget: int
    seeds: int
    mean: float
    minimum: float
    p10: float
    reached_97: float  # fraction of seeds at >= 97% of the optimum

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def strategy_shares(sweep: Sweep, strategies: list[str], fractions=(0.10, 0.25), seeds: int = 30,
                    seeds_by_strategy: dict[str, int] | None = None) -> list[ShareStats]:
    """Share of the optimum each strategy reaches after each fraction of the measured space."""
    n = len(sweep.configs)
    out = []
    for strategy in strategies:
        runs = 1 if strategy == "exhaustive" else (seeds_by_strategy or {}).get(strategy, seeds)
        for fraction in fractions:
            budget = max(1, math.ceil(fraction * n))
            shares = sorted(replay_once(sweep, strategy, budget, seed) for seed in range(runs))
            out.append(ShareStats(
                strategy=strategy, fraction=fraction, budget=budget, seeds=runs, mean=statistics.fmean(shares),
                minimum=shares[0], p10=shares[max(0, int(0.1 * runs) - 1)] if runs > 1 else shares[0],
                reached_97=sum(s >= 0.97 for s in shares) / runs,
            ))
    return out


def markdown_table(name: str, stats: list[ShareStats], n: int) -> str:
    fractions = sorted({s.fraction for s in stats})
    head = "| strategy | " + " | ".join(f"{int(f * 100)}% ({next(s.budget for s in stats if s.fraction == f)} evals): "
                                          "mean / min / runs >= 97%" for f in fractions) + " |"
    lines = [f"**{name}** ({n} configurations measured)", "", head, "|---" * (len(fractions) + 1) + "|"]
    for strategy in dict.fromkeys(s.strategy for s in stats):
        cells = []
        for f in fractions:
            s = next(x for x in stats if x.strategy == strategy and x.fraction == f)
            cells.append(f"{s.mean:.1%} / {s.minimum:.1%} / {s.reached_97:.0%} (of {s.seeds})")
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
