"""The tuning step's asks at the edge (search/tuning.py makes them, every evaluator answers them):
a sweep's verdict turned into the engine's `SweepOutcome`, and the seed cache (tune/seeds.py) read
for a `SeedsAsk` and written with what a sweep, or a tuning instance's full verdict, measured.

The seed cache is the user's (`tune.cache.default_cache_dir()/seeds`, `KW_TUNE_CACHE`), shared
with the autopilot and `kernelwright tune`: a tuning in one run starts where earlier ones of the
same template family, device and shape ended. Reading it is an ask, so its answer is in the run's
replay log; writing it is a side effect of answering a sweep or a tuning instance's evaluation
(asks carrying `EvaluationAsk.seed`), here at the edge. A file that cannot
be read or written costs the seeds, never the run (SeedCache warns).
"""
from __future__ import annotations

import logging
from typing import Any

from kernelwright.judge.sweep import SweepResult, settle
from kernelwright.tune.evaluate import FAIL, PASS, Measurement
from kernelwright.tune.seeds import SeedCache
from kernelwright.tune.sweep_eval import sweep_measurement
from kernelwright.tune.template import TemplateError, parse_template

from ..asks import Answer, EvaluationAsk, SeedsAsk, SweepAsk
from ..results import AskFailure, SeedsResult, SweepOutcome

log = logging.getLogger("kernelwright.search")


def sweep_instances(ask: SweepAsk) -> list[dict[str, Any]]:
    """The sweep's instances as a judge request carries them (judge/sweep.py)."""
    return [{"params": dict(i.params), "source": i.source} for i in ask.instances]


def sweep_answer(ask: SweepAsk, verdict) -> Answer:
    """The engine's record of a sweep from the evaluation's verdict (`verdict.sweep`); the timed
    configurations and the failures go into the seed cache when the ask names a template. No
    verdict is stored for a sweep: its record is the result (it judges no candidate)."""
    record = settle(ask.instances, verdict)
    record_seeds(ask, record)
    return Answer(SweepOutcome.from_verdict(record, verdict))


def record_seeds(ask: SweepAsk, record: SweepResult) -> None:
    """What the sweep measured, into the seed cache (a full judgement outranks it there)."""
    if not ask.template or not ask.device:
        return
    try:
        template = parse_template(ask.template, name="templatized")
    except TemplateError as exc:  # the engine parsed it: not expected
        log.warning("sweep %s: its template cannot be read for the seed cache: %s", ask.id, exc)
        return
    reached = [sweep_measurement(c, record) for c in record.configs if c.status != "not_run"]
    SeedCache().record(template, ask.device, reached)


def record_verdict_seed(ask: EvaluationAsk, verdict) -> None:
    """A tuning instance's full verdict into the seed cache (it outranks sweep times there)."""
    if ask.seed is None:
        return
    try:
        template = parse_template(ask.seed.template, name="templatized")
    except TemplateError as exc:  # the engine parsed it: not expected
        log.warning("evaluation %s: its template cannot be read for the seed cache: %s", ask.id, exc)
        return
    timed = verdict.passed and verdict.timing is not None
    SeedCache().record(template, ask.seed.device, [Measurement(
        dict(ask.seed.params), PASS if timed else FAIL, time_ms=verdict.timing.median_ms if timed else None)])


def seeds_answer(ask: SeedsAsk) -> Answer:
    """The seed cache's best configurations for the ask's template on its device."""
    try:
        template = parse_template(ask.template, name="templatized")
    except TemplateError as exc:
        return Answer(AskFailure("TemplateError", str(exc)))
    return Answer(SeedsResult(SeedCache().lookup(template, ask.device, limit=ask.limit)))
