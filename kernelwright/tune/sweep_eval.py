"""Configurations benchmarked inside one judge evaluation, the winner judged in full (issue 33).

`SweepEvaluator.evaluate(template, configs)` answers what the tuning cache holds, sends the other
configurations' instances to the judge as ONE sweep request (`judge.api.judge_sweep`: each
instance built, checked on one trial and timed by one repeat of the judge's timed calls in the
same evaluation), then judges the fastest instance again from scratch, as a normal evaluation of
a candidate (every trial, the guards, the steady timing); when that full judgement fails, the
runner-up is judged too. Only a fully judged instance reports status `pass`, so only it can become
the tuning's best; the others report `swept` (their sweep time, which the strategy learns from),
or the sweep's failure with its reason.

Cost: a batch of N new configurations costs two judge evaluations (`runs_for`): the sweep and the
winner's judgement (three when the winner fails and the runner-up is judged). A sweep whose runner
died (a crash, a hang) left the configurations after it unrun: they go into another sweep (one
more evaluation), at most `resends` times while each one gets further.

A sweep runs in its own sandboxed evaluation, not through a shared `JudgePool` (whose GPU memory
admission it does not join; its checker still takes the device lock to time alone); the full
judgements go through the pool when there is one, as `JudgeEvaluator`'s do.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from kernelwright.judge.api import judge_sweep
from kernelwright.judge.sweep import NOT_RUN, SweepInstance

from .cache import digest
from .cost import verdict_seconds
from .evaluate import ERROR, FAIL, SWEPT, JudgeEvaluator, Measurement, file_stem, instance_hash
from .template import Template

_STATUS = {"build_error": ERROR, "not_run": ERROR, "failed": FAIL, "rejected": FAIL, "crashed": FAIL,
           "timed_out": FAIL}


def sweep_measurement(found, result, source: str = "") -> Measurement:
    """What one configuration's record in a sweep (`judge.sweep.ConfigResult` of `result`, a
    `SweepResult`) tells a tuner: status `swept` with its time, or its failure with the reason.
    Also read by the search's tuning step (search/tuning.py), which costs the sweep itself."""
    return Measurement(dict(found.params), SWEPT if found.ok else _STATUS.get(found.status, ERROR),
                       time_ms=found.time_ms if found.ok else None, method=result.method, stage="sweep",
                       note=result.timing_note if found.ok else "",
                       error=None if found.ok else f"{found.status} in a sweep: {found.reason}",
                       instance_hash=instance_hash(source) if source else "", runs=0)


class SweepEvaluator(JudgeEvaluator):
    """A JudgeEvaluator that sweeps a batch in one evaluation and judges its winner in full."""

    def __init__(self, problem_path: str | Path, config=None, *, runner_up: bool = True, resends: int = 2,
                 **kwargs: Any):
        super().__init__(problem_path, config, **kwargs)
        self.runner_up = runner_up
        self.resends = resends
        self.context = digest({"judge": self.context, "measured_by": "sweep"})  # never mixed with single judgements
        self.sweeps: list[Any] = []  # every judge.sweep.SweepResult, in order (bench/tune_sweep_gpu.py reads them)

    def runs_for(self, n: int) -> int:
        return 0 if n <= 0 else 1 if n == 1 else 2

    def evaluate(self, template: Template, configs: list[dict[str, Any]]) -> list[Measurement]:
        results: list[Measurement | None] = [None] * len(configs)
        todo = []
        for i, params in enumerate(configs):
            hit = self.cache.get(template.hash, params, self.device, self.sizes, self.context) if self.cache else None
            if hit is not None:
                results[i] = Measurement.from_dict({**hit, "cached": True})
            else:
                todo.append(i)
        if len(todo) == 1:  # nothing to rank: judged in full at once
            return self._fill(template, configs, results, {todo[0]: None})
        swept = self._sweep(template, [configs[i] for i in todo])
        found = {i: m for i, m in zip(todo, swept, strict=True)}
        for index in self._finalists(found):
            self._fill(template, configs, results, {index: found.pop(index)})
            if results[index].ok:
                break
        for i, m in found.items():
            results[i] = self._store(template, configs[i], m)
        return [r for r in results if r is not None]

    # ------------------------------------------------------------------ the sweep

    def _sweep(self, template: Template, configs: list[dict[str, Any]]) -> list[Measurement]:
        """One sweep of `configs` (resent where a dying runner left some unrun)."""
        out: list[Measurement | None] = [None] * len(configs)
        left = list(range(len(configs)))
        for attempt in range(self.resends + 1):
            instances = [SweepInstance(configs[i], template.instantiate(configs[i])) for i in left]
            with self.waiting() if self.waiting is not None else contextlib.nullcontext():
                result, verdict = judge_sweep(self.problem_path, instances, self.config)
            self.sweeps.append(result)
            device_s, judge_s = verdict_seconds(verdict)
            for k, (i, found) in enumerate(zip(left, result.configs, strict=True)):
                out[i] = self._swept(found, instances[k].source, result, first=k == 0, device_s=device_s,
                                     judge_s=judge_s)
            unrun = [i for i, found in zip(left, result.configs, strict=True) if found.status == NOT_RUN]
            if not unrun or len(unrun) == len(left) or attempt == self.resends:
                break
            left = unrun
        return [m for m in out if m is not None]

    def _swept(self, found, source: str, result, *, first: bool, device_s: float, judge_s: float) -> Measurement:
        """What one configuration's sweep record tells the tuner; the sweep's cost on its first one."""
        m = sweep_measurement(found, result, source)
        m.runs, m.device_s, m.judge_s = (1, device_s, judge_s) if first else (0, 0.0, 0.0)
        return m

    def _finalists(self, found: dict[int, Measurement]) -> list[int]:
        """The configurations to judge in full: the fastest, then the runner-up."""
        ranked = sorted((m.time_ms, i) for i, m in found.items() if m.status == SWEPT)
        return [i for _, i in ranked[:2 if self.runner_up else 1]]

    # ------------------------------------------------------------------ full judgements

    def _fill(self, template: Template, configs: list[dict[str, Any]], results: list,
              chosen: dict[int, Measurement | None]) -> list:
        """Judge each chosen configuration in full (a normal evaluation, from scratch); its verdict
        is its measurement (the sweep's time stays in its note)."""
        for index, swept in chosen.items():
            source = template.instantiate(configs[index])
            ihash = instance_hash(source)
            path = self.workdir / f"{file_stem(template.name)}_{ihash}.py"
            path.write_text(source)
            for _, verdict in self._judge_each([path]):
                m = self._measurement(configs[index], verdict, ihash)
                if swept is not None:  # what the sweep cost stays counted where it was carried
                    m.note = "; ".join(filter(None, [m.note, f"sweep: {swept.time_ms:.4g} ms"]))
                    m.runs, m.device_s, m.judge_s = m.runs + swept.runs, m.device_s + swept.device_s, \
                        m.judge_s + swept.judge_s
                results[index] = self._store(template, configs[index], m)
        return results

    def _store(self, template: Template, params: dict[str, Any], m: Measurement) -> Measurement:
        if self.cache is not None:  # stored as it arrives: an interruption loses nothing measured
            self.cache.put(template.hash, params, self.device, self.sizes, m.to_dict(), self.context)
        return m

