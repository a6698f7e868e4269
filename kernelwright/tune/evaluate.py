"""Turning configurations into measurements: by the judge, or from a table measured earlier.

An evaluator takes a template and a batch of configurations and returns one `Measurement` each,
in order. The judge evaluator writes each instance to a file and judges it (through the judge's
worker pool when there is one, else a thread per worker, each judge call being its own process),
consulting and filling the tuning cache: each verdict is stored the moment it arrives, so an
interrupted tuning keeps everything it measured. The table evaluator answers from a recorded
sweep: it is how strategies are compared offline (bench/tune_replay.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import kernelwright
from kernelwright.judge import JudgeConfig
from kernelwright.judge.verdict import SCHEMA_VERSION

from .cache import TuneCache, digest
from .cost import verdict_seconds
from .hardware import DeviceLimits, detect_limits
from .prune import KernelResources, resource_violation
from .resources import parse_ptxas
from .template import Template, config_key

PASS, FAIL, ERROR, PRUNED = "pass", "fail", "error", "pruned"
# timed inside a sweep (judge/sweep.py, tune/sweep_eval.py): its time ranks it for the strategy, but
# only a fully judged instance (status pass) can be the best
SWEPT = "swept"


@dataclass
class Measurement:
    params: dict[str, Any]
    status: str  # pass | fail | error | pruned | swept
    time_ms: float | None = None
    method: str = ""  # how time was taken: cuda_events, cuda_graph, do_bench, wall_cpu, table
    note: str = ""  # e.g. "CPU wall time: not GPU performance"
    error: str | None = None
    stage: str = ""  # the judge's last stage, or "compiled" for a post-compile prune
    cached: bool = False
    resources: list[dict[str, Any]] = field(default_factory=list)
    verdict: dict[str, Any] | None = None  # the judge's verdict as a dict, when the judge measured it
    instance_hash: str = ""
    device_s: float = 0.0  # what measuring it cost (tune.cost): seconds in the device stages
    judge_s: float = 0.0  # and wall seconds of the judging (or in-process measuring)
    # judge evaluations (processes) it cost: 1 for a judged instance; a sweep's one evaluation is
    # carried by its first configuration, the others carry 0 (tune.cost counts them)
    runs: int = 1

    @property
    def ok(self) -> bool:
        """Fully judged and passed: only such an instance can be a tuning's best."""
        return self.status == PASS and self.time_ms is not None

    @property
    def value(self) -> float | None:
        """What a search minimises: the time when the instance passed (fully, or its sweep's
        trial and timed calls), else None."""
        return self.time_ms if self.ok or (self.status == SWEPT and self.time_ms is not None) else None

    def summary(self) -> str:
        if self.ok:
            return f"{self.time_ms:.4g} ms ({self.method})"
        if self.status == SWEPT and self.time_ms is not None:
            return f"swept: {self.time_ms:.4g} ms ({self.method}, one repeat; not judged in full)"
        return f"{self.status}: {(self.error or '').splitlines()[0][:160] if self.error else self.stage}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Measurement":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Evaluator(Protocol):
    device: str

    def evaluate(self, template: Template, configs: list[dict[str, Any]]) -> list[Measurement]: ...


def runs_for(evaluator, n: int) -> int:
    """The judge evaluations `evaluator` spends on a batch of `n` new configurations: one each,
    unless it says otherwise (a sweep evaluator: one sweep and one full judgement)."""
    counter = getattr(evaluator, "runs_for", None)
    return int(counter(n)) if counter is not None else n


def instance_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


class TableEvaluator:
    """Answers from a recorded sweep {config_key: {"status":..., "time_ms":...}}; counts lookups."""

    device = "table"

    def __init__(self, table: dict[str, dict[str, Any]]):
        self.table = table
        self.lookups = 0

    def evaluate(self, template: Template | None, configs: list[dict[str, Any]]) -> list[Measurement]:
        out = []
        for config in configs:
            self.lookups += 1
            row = self.table.get(config_key(config))
            if row is None:
                out.append(Measurement(config, ERROR, error="configuration missing from the recorded table",
                                       method="table"))
            else:
                out.append(Measurement(config, row.get("status", PASS), row.get("time_ms"), method="table",
                                       error=row.get("error")))
        return out


def judge_device(config) -> str:
    """The device name a judge run will time on: part of the cache key."""
    try:
        import torch  # noqa: PLC0415 -- tune/ stays torch-free at import: the agents and the search import it (tune/__init__.py); a broken torch means no GPU here

        if config.device != "cpu" and torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001 -- a broken CUDA setup names the device "cpu" in the cache key
        pass
    return "cpu"


# judge settings that cannot change a measurement: left out of the cache context
_NOT_CONTEXT = ("timeout_s", "compile_timeout_s", "output_limit_bytes", "cache_dir", "profile", "baselines")


class JudgeEvaluator:
    """Judge each instance in its own process, `workers` at a time, with the tuning cache."""

    def __init__(self, problem_path: str | Path, config=None, *, workers: int = 1, workdir: str | Path | None = None,
                 cache: TuneCache | None = None, limits: DeviceLimits | None = None, allow_spills: bool = False,
                 pool=None, waiting=None):
        self.problem_path = str(problem_path)
        self.config = config or JudgeConfig()
        self.workers = max(1, workers)
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="kw-tune-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cache = cache
        self.limits = limits or detect_limits()
        self.allow_spills = allow_spills
        self.pool = pool  # a JudgePool shared with other tuners (a suite's problems); else one per batch
        self.waiting = waiting  # () -> context manager around the wait for verdicts (a suite's other runs go on)
        self.device = judge_device(self.config)
        self.context = judge_context(problem_path, self.config)
        self.sizes = {"overrides": self.config.overrides, "shrink": self.config.shrink}

    def evaluate(self, template: Template, configs: list[dict[str, Any]]) -> list[Measurement]:
        results: list[Measurement | None] = [None] * len(configs)
        todo: list[tuple[int, Path, str]] = []
        for i, params in enumerate(configs):
            hit = (self.cache.get(template.hash, params, self.device, self.sizes, self.context)
                   if self.cache is not None else None)
            if hit is not None:
                results[i] = dataclasses.replace(Measurement.from_dict(hit), cached=True)
                continue
            source = template.instantiate(params)
            ihash = instance_hash(source)
            path = self.workdir / f"{file_stem(template.name)}_{ihash}.py"
            path.write_text(source)
            todo.append((i, path, ihash))
        for k, verdict in self._judge_each([path for _, path, _ in todo]):
            i, _, ihash = todo[k]
            measurement = self._measurement(configs[i], verdict, ihash)
            results[i] = measurement
            if self.cache is not None:  # stored as it arrives: an interruption loses nothing measured
                self.cache.put(template.hash, configs[i], self.device, self.sizes, measurement.to_dict(), self.context)
        return [r for r in results if r is not None]

    def _judge_each(self, paths: list[Path]):
        """(index, verdict) pairs as the verdicts arrive."""
        if not paths:
            return
        pairs = [(self.problem_path, str(p)) for p in paths]
        if self.pool is not None:  # the verdicts are handed on after the wait: the caller's work stays gated
            with self.waiting() if self.waiting is not None else contextlib.nullcontext():
                arrived = list(self.pool.iter_judge([(problem, path, self.config) for problem, path in pairs]))
            yield from arrived
            return
        from kernelwright.judge.scheduling.pool import JudgePool  # noqa: PLC0415 -- the judge's pool pulls api.py, the sandbox and the supervisor (0.1-0.3 s): kept out of tune/'s import, which the CLI and the agents load

        pool = JudgePool(self.config, compile_workers=self.workers, cpu_workers=self.workers)
        try:
            yield from pool.iter_judge(pairs)
        finally:
            pool.close(wait=False)

    def _measurement(self, params: dict[str, Any], verdict, ihash: str) -> Measurement:
        resources = verdict_resources(verdict)
        m = measured(params, verdict, ihash, resources)
        why = resource_violation(resources, self.limits, self.allow_spills) if resources else None
        if why:
            m.status, m.stage, m.error, m.time_ms = PRUNED, "compiled", why, None
        return m


def measured(params: dict[str, Any], verdict, ihash: str,
             resources: list[KernelResources] | None = None) -> Measurement:
    """What a judge verdict (judge.verdict.Verdict) says of one instance, before any pruning for a
    device's limits: its status, its median time when it passed, its resources (`resources`, when
    the caller has read them already) and cost."""
    timing = verdict.timing
    resources = verdict_resources(verdict) if resources is None else resources
    device_s, judge_s = verdict_seconds(verdict)
    return Measurement(
        params=params, status=verdict.status, stage=verdict.stage, error=verdict.error,
        time_ms=timing.median_ms if (timing and verdict.passed) else None,
        method=timing.method if timing else "", note=timing.note if timing else "",
        resources=[r.to_dict() for r in resources], verdict=verdict.to_dict(), instance_hash=ihash,
        device_s=device_s, judge_s=judge_s,
    )


def judge_context(problem_path: str | Path, config) -> str:
    """What besides the instance decides a judge measurement: the problem (its text, not only its
    name), the judge settings that can change a result, and the judge's own version (a verdict of
    an older judge is not reused)."""
    settings = {k: v for k, v in config.to_dict().items() if k not in _NOT_CONTEXT}
    try:
        text = Path(problem_path).read_bytes()
    except OSError:
        text = b""
    return digest({"problem": Path(problem_path).name, "source": hashlib.sha256(text).hexdigest(), "judge": settings,
                   "kernelwright": kernelwright.__version__, "verdict_schema": SCHEMA_VERSION})


def verdict_resources(verdict) -> list[KernelResources]:
    """Compiler-reported resources in a verdict: a `kernels` list if the judge records one, else ptxas -v text."""
    compile_result = verdict.compile
    if compile_result is None:
        return []
    kernels = getattr(compile_result, "kernels", None)
    if isinstance(kernels, list):
        return [KernelResources(**{k: v for k, v in item.items() if k in KernelResources.__dataclass_fields__})
                for item in kernels if isinstance(item, dict) and "name" in item]
    return parse_ptxas(compile_result.log or "")


def file_stem(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40] or "template"


def table_from_measurements(measurements: list[Measurement]) -> dict[str, dict[str, Any]]:
    """{config_key: row} as TableEvaluator reads it; used to save a sweep."""
    return {config_key(m.params): {"status": m.status, "time_ms": m.time_ms, "error": m.error}
            for m in measurements}
