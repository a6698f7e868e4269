"""Judge on a Ray cluster: one judge actor per GPU, extension builds on CPUs, lost evaluations re-queued.

    pool = RayJudgePool(RayOptions(address="auto"))
    verdict = await pool.ajudge(NodeJob(problem_text, "problem.py", code, "c7", config.to_dict()))

- **Actors.** One `JudgeActor` per GPU of the cluster, each asking Ray for `num_gpus=1` (and one
  CPU); on a cluster without GPUs (tests, CPU-only judging), `actors` of them asking for one CPU
  each. An actor owns a `kernelwright.judge.scheduling.node.NodeJudge`: a local `JudgePool` over its GPU, so
  each candidate runs in its own sandboxed worker process exactly as in a local run, up to
  `per_gpu` of them at once, correctness overlapping and timing alone on the GPU (the device lock).
- **Compilation on CPUs.** A C++/CUDA candidate (on GPU actors) is first built by a Ray task that
  asks for one CPU and no GPU, on the node of the actor that will judge it (or anywhere when the
  judge's `cache_dir` names shared storage); the actor then finds the build in the cache. A failed
  build there is no verdict: the evaluation builds again and reports, as in a local pool.
- **Losses.** A dead actor (its process killed, its node lost) fails its calls with a Ray error; the
  evaluation goes back in the queue for another actor (a replacement actor is started), at most
  `max_attempts` times. Then `JudgeLost` says what happened: the candidate is not blamed.
- **A failed GPU.** An actor whose GPU failed (its pool probed it and took it out: the verdict is
  `gpu_health.no_gpu_left`) is retired: it gets no more evaluations and is left running, so it keeps
  holding the broken GPU in Ray's accounts and no new actor is placed there; the evaluation goes to
  another actor, counted as a lost attempt, and its verdict carries the INFO flag `gpu_failed_rejudged`.
- **Where.** Every verdict carries `environment["judged_on"]`: host, GPU (index, UUID, name), Ray
  node and actor ids, the attempt that judged it and the attempts lost before.

Ray is imported only when a pool starts (`pip install "kernelwright[ray]"`).
"""
from __future__ import annotations

import asyncio
import importlib.util
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable

from kernelwright.judge.candidate_kinds import backend_of
from kernelwright.judge.scheduling.gpu_health import GPU_FAILED, no_gpu_left
from kernelwright.judge.scheduling.node import NodeJob, NodeJudge, precompile
from kernelwright.judge.scheduling.pool import DEFAULT_PER_GPU
from kernelwright.judge.verdict import INFO, Flag, Verdict

INSTALL_HINT = 'pip install "kernelwright[ray]"'


class RayUnavailable(RuntimeError):
    """Ray is not installed, the cluster cannot be reached, or no judge actor can run on it."""


class JudgeLost(RuntimeError):
    """Every attempt to judge a candidate lost its actor (killed worker, lost node)."""

    def __init__(self, lost: list[dict[str, Any]]):
        self.lost = lost
        where = "; ".join(f"attempt {i + 1} on {x.get('hostname') or x.get('ray_node_id') or '?'}: {x['error']}"
                          for i, x in enumerate(lost))
        super().__init__(f"the evaluation was lost {len(lost)} time(s), each time with the Ray actor judging it "
                         f"(a killed worker process or a lost node; not the candidate's verdict): {where}")


def ray_installed() -> bool:
    return importlib.util.find_spec("ray") is not None


def import_ray():
    try:
        import ray  # noqa: PLC0415 -- ray is optional (kernelwright[ray]) and heavy (0.3-0.4 s): imported when a Ray pool is used (docs/architecture.md)
    except ImportError as exc:
        raise RayUnavailable(f"evaluating on Ray needs the ray package, which is not installed ({exc}): "
                             f"{INSTALL_HINT}") from None
    return ray


@dataclass
class RayOptions:
    # None: $RAY_ADDRESS, else a cluster started on this machine with `ray start`, else a new
    # local instance with this machine's CPUs and GPUs; "auto", "HOST:PORT" or "ray://HOST:PORT"
    address: str | None = None
    actors: int | None = None  # judge actors; None: one per GPU of the cluster (no GPUs: one)
    per_gpu: int = DEFAULT_PER_GPU  # evaluations at once in one GPU actor
    cpu_slots: int = 1  # evaluations at once in one CPU actor (a cluster without GPUs)
    max_attempts: int = 3  # tries of one evaluation whose actor is lost
    precompile: bool | None = None  # C++/CUDA candidates built in a CPU task first; None: on GPU actors
    start_timeout_s: float = 300.0  # the actors must be running within this
    init_kwargs: dict[str, Any] = field(default_factory=dict)  # more ray.init arguments (runtime_env, ...)

    def key(self) -> tuple:
        return (self.address, self.actors, self.per_gpu, self.cpu_slots, self.max_attempts, self.precompile)


class JudgeActor:
    """The Ray actor (wrapped by `ray.remote` when a pool starts): a NodeJudge and where it runs."""

    def __init__(self, per_gpu: int | None, cpu_slots: int, use_gpus: bool):
        import ray  # noqa: PLC0415 -- ray is optional (kernelwright[ray]) and heavy (0.3-0.4 s): imported when a Ray pool is used (docs/architecture.md)

        self.node = NodeJudge(per_gpu=per_gpu, cpu_workers=cpu_slots, use_gpus=use_gpus)
        context = ray.get_runtime_context()
        self.node.where.update(ray_node_id=context.get_node_id(), ray_actor_id=context.get_actor_id(),
                               ray_node_ip=ray.util.get_node_ip_address())

    def info(self) -> dict[str, Any]:
        return dict(self.node.where)

    def judge(self, job: dict[str, Any], precompile_s: float | None) -> dict[str, Any]:
        return self.node.judge(NodeJob.from_dict(job), precompile_s).to_dict()


def precompile_on_node(job: dict[str, Any], arch: str) -> float | None:
    """The Ray task body of a CPU-only extension build (see kernelwright.judge.scheduling.node.precompile)."""
    return precompile(NodeJob.from_dict(job), arch)


@dataclass
class _Actor:
    handle: Any
    slots: int
    info: dict[str, Any] | None = None
    busy: int = 0
    alive: bool = True

    @property
    def node_id(self) -> str | None:
        return (self.info or {}).get("ray_node_id")


class RayJudgePool:
    """See the module docstring. `start()` connects and starts the actors (the first `ajudge` does
    it otherwise); `close()` ends the actors."""

    def __init__(self, options: RayOptions | None = None):
        self.options = options or RayOptions()
        self.use_gpus = False
        self._actors: list[_Actor] = []
        self._start_lock = threading.Lock()
        self._start_error: RayUnavailable | None = None
        self._waiters: list[asyncio.Future] = []
        self._tasks: set[asyncio.Task] = set()
        self._remote_actor = self._remote_compile = None

    # ------------------------------------------------------------------ starting

    def start(self) -> None:
        """Connect and start the actors; a failure is kept, so evaluations waiting for the same
        start do not each wait out the timeout again (a new pool tries afresh)."""
        with self._start_lock:
            if self._actors:
                return
            if self._start_error is not None:
                raise self._start_error
            try:
                self._start()
            except RayUnavailable as exc:
                self._start_error = exc
                raise

    @property
    def start_failed(self) -> bool:
        return self._start_error is not None

    def _start(self) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            self._connect(ray)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        self.use_gpus = gpus > 0
        self._remote_actor = ray.remote(JudgeActor)
        self._remote_compile = ray.remote(precompile_on_node)
        actors = [self._new_actor() for _ in range(self.options.actors or gpus or 1)]
        try:
            infos = ray.get([a.handle.info.remote() for a in actors], timeout=self.options.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            for actor in actors:
                ray.kill(actor.handle)
            raise RayUnavailable(self._no_room(ray, len(actors))) from None
        except ray.exceptions.RayError as exc:
            raise RayUnavailable(f"the judge actors failed to start: {exc}") from None
        for actor, info in zip(actors, infos, strict=True):
            actor.info = info
        self._actors = actors

    def _connect(self, ray) -> None:
        kwargs = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING,
                  **self.options.init_kwargs}
        try:
            ray.init(address=self.options.address, **kwargs)
        except Exception as exc:  # noqa: BLE001 - ray raises many kinds; all mean "no cluster"
            where = self.options.address or "a local instance"
            raise RayUnavailable(f"could not start or reach Ray ({where}): {type(exc).__name__}: {exc}") from None

    def _no_room(self, ray, count: int) -> str:
        total = ray.cluster_resources()
        wants = "one GPU and one CPU" if self.use_gpus else "one CPU"
        return (f"{count} judge actor(s), each asking for {wants}, did not start within "
                f"{self.options.start_timeout_s:g} s; the cluster has {total.get('GPU', 0):g} GPU(s) and "
                f"{total.get('CPU', 0):g} CPU(s), free now: {ray.available_resources()}")

    def _new_actor(self) -> _Actor:
        options = self.options
        if self.use_gpus:
            slots, resources, args = options.per_gpu, {"num_gpus": 1, "num_cpus": 1}, (options.per_gpu, 1, True)
        else:
            slots, resources, args = options.cpu_slots, {"num_cpus": 1}, (None, options.cpu_slots, False)
        handle = self._remote_actor.options(max_restarts=0, max_task_retries=0, max_concurrency=slots + 1,
                                            **resources).remote(*args)
        return _Actor(handle, slots)

    async def _ensure_started(self) -> None:
        if not self._actors:
            await asyncio.to_thread(self.start)

    def actors(self) -> list[dict[str, Any]]:
        """Where the live actors run (their `judged_on` description)."""
        return [dict(a.info or {}) for a in self._actors if a.alive]

    # ------------------------------------------------------------------ judging

    async def ajudge(self, job: NodeJob) -> Verdict:
        """The candidate's verdict; `JudgeLost` when every attempt lost its actor."""
        await self._ensure_started()
        ray = import_ray()
        losses = (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                  ray.exceptions.ObjectLostError, ray.exceptions.OutOfMemoryError)
        lost: list[dict[str, Any]] = []
        for attempt in range(1, self.options.max_attempts + 1):
            node, precompile_s = await self._head_start(job)
            actor = await self._acquire(node)
            try:
                data = await actor.handle.judge.remote(job.to_dict(), precompile_s)
            except losses as exc:
                lost.append({**(actor.info or {}), "error": f"{type(exc).__name__}: {_first_line(exc)}"})
                self._replace(actor)
                continue
            finally:
                self._release(actor)
            verdict = Verdict.from_dict(data)
            if no_gpu_left(verdict):  # the actor's GPU failed: the evaluation goes to another actor
                lost.append({**(actor.info or {}), "error": verdict.error, "gpu_failed": True})
                self._retire(actor)
                if not any(a.alive for a in self._actors):
                    break
                continue
            verdict.environment.setdefault("judged_on", {}).update(attempt=attempt, lost=lost)
            failed = [x for x in lost if x.get("gpu_failed")]
            if failed:
                verdict.flags.append(Flag(GPU_FAILED, INFO, "judged again on another actor after the GPU of "
                                          + "; ".join(_gpu_of(x) + f": {x['error']}" for x in failed)
                                          + " (taken out of rotation; not held against the candidate)"))
            return verdict
        raise JudgeLost(lost)

    def judge_many(self, jobs: Iterable[NodeJob]) -> list[Verdict | JudgeLost]:
        """Verdicts in the order of `jobs`, all in flight at once (a `JudgeLost` where one was lost)."""
        async def run():
            return await asyncio.gather(*(self.ajudge(job) for job in jobs), return_exceptions=True)

        results = asyncio.run(run())
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, JudgeLost):
                raise result
        return results

    def close(self) -> None:
        if self._actors:
            ray = import_ray()
            for actor in self._actors:
                if actor.alive:
                    ray.kill(actor.handle)
        self._actors = []

    # ------------------------------------------------------------------ compile on CPUs

    def _wants_precompile(self, job: NodeJob) -> bool:
        wanted = self.options.precompile
        if wanted is None:  # as a local pool: only when the actors judge on GPUs
            wanted = self.use_gpus and job.config.get("device") != "cpu"
        return bool(wanted) and backend_of(job.candidate_source) == "cuda"

    async def _head_start(self, job: NodeJob) -> tuple[str | None, float | None]:
        """Build a C++/CUDA extension in a CPU task on the node that will judge it: (that node, the
        build's seconds or None); (None, None) when there is nothing to build."""
        if not self._wants_precompile(job):
            return None, None
        target = self._roomiest()
        if target is None:
            return None, None
        arch = job.config.get("cuda_arch_list") or (target.info or {}).get("cuda_arch_list", "")
        if not arch:  # no GPU to build for (a CPU cluster asked to precompile without an arch list)
            return None, None
        shared_cache = bool(job.config.get("cache_dir"))
        node = None if shared_cache else target.node_id
        options: dict[str, Any] = {"num_cpus": 1, "num_gpus": 0}
        if node:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: PLC0415 -- ray is optional (kernelwright[ray]) and heavy (0.3-0.4 s): imported when a Ray pool is used (docs/architecture.md)

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=True)
        try:
            seconds = await self._remote_compile.options(**options).remote(job.to_dict(), arch)
        except import_ray().exceptions.RayError:
            seconds = None  # a head start only: the evaluation builds again
        return node, seconds

    def _roomiest(self) -> _Actor | None:
        live = [a for a in self._actors if a.alive and a.info]
        return min(live, key=lambda a: a.busy / a.slots) if live else None

    # ------------------------------------------------------------------ slots and losses

    async def _acquire(self, node: str | None) -> _Actor:
        """A live actor with a free slot, on `node` while that node has live actors."""
        loop = asyncio.get_running_loop()
        while True:
            live = [a for a in self._actors if a.alive]
            if not live:
                raise RayUnavailable("every judge actor is dead and none could be replaced")
            here = [a for a in live if node and a.node_id == node] or live
            free = [a for a in here if a.busy < a.slots]
            if free:
                actor = min(free, key=lambda a: a.busy)
                actor.busy += 1
                return actor
            waiter = loop.create_future()
            self._waiters.append(waiter)
            await waiter

    def _release(self, actor: _Actor) -> None:
        actor.busy -= 1
        self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                try:
                    waiter.set_result(None)
                except RuntimeError:  # its event loop has ended (an earlier run in this process)
                    pass

    def _retire(self, actor: _Actor) -> None:
        """An actor whose GPU failed takes no more evaluations. It is not killed: alive, it keeps the
        broken GPU reserved in Ray's accounts, so no replacement lands on it."""
        if actor.alive:
            actor.alive = False
            logging.getLogger(__name__).warning("judge actor on %s retired: its GPU failed", _gpu_of(actor.info or {}))
        self._wake()

    def _replace(self, actor: _Actor) -> None:
        """A lost actor's place goes to a new one, which Ray starts wherever there is room."""
        if not actor.alive:
            return
        actor.alive = False
        import_ray().kill(actor.handle, no_restart=True)  # unreachable is not always dead: free its GPU
        fresh = self._new_actor()
        self._actors.append(fresh)
        task = asyncio.get_running_loop().create_task(self._describe(fresh))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._wake()

    async def _describe(self, actor: _Actor) -> None:
        try:
            actor.info = await actor.handle.info.remote()
        except import_ray().exceptions.RayError:
            actor.alive = False
            self._wake()


def _gpu_of(where: dict[str, Any]) -> str:
    """"host GPU 1 (NVIDIA H200)" from an actor's `judged_on` description."""
    gpus = ", ".join(f"GPU {g.get('index')} ({g.get('name')})" for g in where.get("gpus") or [])
    return " ".join(filter(None, [str(where.get("hostname") or ""), gpus])) or "an actor"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
