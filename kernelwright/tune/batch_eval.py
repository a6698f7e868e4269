"""Template instances judged elsewhere: each becomes a request in a batch folder (judge/scheduling/batch.py).

`BatchTemplateEvaluator.evaluate(template, configs)` answers a configuration from the tuning cache, else
from its verdict file in the folder; the others are written as requests (the problem as source
text, the instance's code, the judge settings), and once every configuration of the call has been
looked at, `VerdictsPending` is raised naming them. The tuner stops there; the run pauses. After
`kernelwright judge --batch FOLDER` on the GPU machine, the same tuning replayed (same seed, same
answers) asks the same configurations again and finds their verdicts.

Verdicts found in a call that still has pending ones are handed to `on_found` at once, so a
partly judged round is stored (and reported) before the pause; so are the call's configurations
the cache answered (a resumed session's best instance counts them, as a complete round would). Request names are
PREFIX + template + the instance's hash: stable across sessions and unique in a folder shared by
several runs; a request's priority is the instance's position in its run, so a runner with little
time judges every problem's first instances before anyone's later ones.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kernelwright.judge.request import SourceText
from kernelwright.judge.scheduling.batch_folder import REQUEST_SUFFIX, VERDICT_SUFFIX, write_request
from kernelwright.judge.verdict import Verdict

from .evaluate import JudgeEvaluator, Measurement, file_stem, instance_hash
from .template import Template

BATCH_DEVICE = "batch"  # the cache's device key: the judging device is not this machine


def request_name(prefix: str, template_name: str, ihash: str) -> str:
    """The name of an instance's request (and verdict) file in a batch folder: PREFIX + template +
    the instance's hash (tune.evaluate.instance_hash of its source)."""
    return f"{prefix}{file_stem(template_name)}_{ihash}"


class VerdictsPending(Exception):
    """Instances wait for verdicts in a batch folder; `requests` are their request files."""

    def __init__(self, folder: Path, requests: list[Path]):
        self.folder = Path(folder)
        self.requests = [Path(r) for r in requests]
        super().__init__(f"{len(self.requests)} template instance(s) wait for verdicts in {self.folder}")


class BatchTemplateEvaluator(JudgeEvaluator):
    """A JudgeEvaluator whose judge is a batch folder (see the module docstring)."""

    def __init__(self, problem_path: str | Path, config=None, *, folder: str | Path, problem_source: str,
                 problem_name: str, prefix: str = "",
                 on_found: Callable[[Template, dict[str, Any], str, Measurement], None] | None = None,
                 **kwargs):
        super().__init__(problem_path, config, **kwargs)
        self.folder = Path(folder)
        self.problem_source = problem_source
        self.problem_name = problem_name
        self.prefix = prefix
        self.on_found = on_found
        self.device = BATCH_DEVICE
        self.asked = 0  # configurations looked at so far in this session: the requests' priority

    def request_name(self, template: Template, source: str) -> str:
        return request_name(self.prefix, template.name, instance_hash(source))

    def evaluate(self, template: Template, configs: list[dict[str, Any]]) -> list[Measurement]:
        results: list[Measurement] = []
        found_now: list[tuple[dict[str, Any], str, Measurement]] = []
        waiting: list[Path] = []
        for params in configs:
            self.asked += 1
            hit = self.cache.get(template.hash, params, self.device, self.sizes, self.context) \
                if self.cache is not None else None
            if hit is not None:
                results.append(Measurement.from_dict({**hit, "cached": True}))
                found_now.append((params, None, results[-1]))
                continue
            source = template.instantiate(params)
            verdict = self._verdict(template, source)
            if verdict is None:
                waiting.append(self._request(template, source, priority=self.asked - 1))
                continue
            measurement = self._measurement(params, verdict, instance_hash(source))
            if self.cache is not None:
                self.cache.put(template.hash, params, self.device, self.sizes, measurement.to_dict(), self.context)
            found_now.append((params, source, measurement))
            results.append(measurement)
        if waiting:
            if self.on_found is not None:  # a partly judged round: what came back is stored now
                for params, source, measurement in found_now:  # (and what the cache answered, told again)
                    self.on_found(template, params, source or template.instantiate(params), measurement)
            raise VerdictsPending(self.folder, waiting)
        return results

    def _verdict(self, template: Template, source: str):
        path = self.folder / f"{self.request_name(template, source)}{VERDICT_SUFFIX}"
        if not path.is_file():
            return None
        try:
            return Verdict.from_json(path.read_text())
        except (OSError, ValueError, TypeError):
            return None

    def _request(self, template: Template, source: str, priority: int) -> Path:
        name = self.request_name(template, source)
        path = self.folder / f"{name}{REQUEST_SUFFIX}"
        if path.is_file():  # written by an earlier session: the runner may be judging it already
            return path
        problem = SourceText(self.problem_source, name=f"{self.problem_name}.py")
        return write_request(self.folder, name, problem, source, self.config, priority=priority)
