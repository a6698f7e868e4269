"""What every stage of one evaluation shares: the request, the settings, the verdict being written,
where it is written, the judge's own modules, the stage clock, the runner (`link`). Stage results
are not kept here: each stage returns its own typed record (`records`), and the next stage takes
it as its input.

The runner runs only while this evaluation holds the device (`on_device`): it is stopped
(SIGSTOP) whenever the hold is given up, so a thread the candidate left running cannot use the GPU
while another evaluation times or a baseline is measured.
"""
from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from kernelwright.files import atomic_write

from ....problem.errors import line_in_file
from ...config import JudgeConfig
from ...request import JudgeRequest, default_cache_dir
from ...stagetimes import LockUse, StageTimer
from ...verdict import Flag, Verdict

_perf_counter = time.perf_counter  # captured before candidate code can replace it


class ResultWriter:
    """Atomic writes of the (partial) verdict and one-line progress marks for the parent's clock."""

    def __init__(self, request: JudgeRequest, token: str, timer: StageTimer | None = None):
        self.result_path, self.progress_path, self.token = Path(request.result_path), Path(request.progress_path), token
        self.timer = timer  # stage times so far go into every write: a crash keeps where the time went

    def progress(self, line: str) -> None:
        with open(self.progress_path, "a") as fh:
            fh.write(line + "\n")

    def stage(self, verdict: Verdict, stage: str) -> None:
        verdict.stage = stage
        self.progress(f"stage {stage}")
        self.write(verdict, complete=False)

    def write(self, verdict: Verdict, complete: bool) -> None:
        if self.timer is not None:
            verdict.stage_seconds.update(self.timer.rounded())
        payload = {"token": self.token, "complete": complete, "verdict": verdict.to_dict()}
        atomic_write(self.result_path, json.dumps(payload, default=_jsonable))


def _jsonable(obj: Any) -> Any:
    return obj.item() if hasattr(obj, "item") else str(obj)


@dataclass
class Context:
    """One evaluation's shared state. `stopped` is set by the stage that decided the verdict."""

    request: JudgeRequest
    config: JudgeConfig
    verdict: Verdict
    writer: ResultWriter
    modules: dict[str, ModuleType] = field(default_factory=dict)  # timing, compile, baseline, floor, env
    notes: list[str] = field(default_factory=list)  # judge notes for the verdict (info flags)
    timer: StageTimer = field(default_factory=StageTimer)
    lock_use: LockUse = field(default_factory=LockUse)  # holds and seconds held, per lock kind
    holding: tuple[Any, str] | None = None  # (the device lock, "shared" or "exclusive") inside on_device
    problem_path: Path | None = None
    candidate_path: Path | None = None
    candidate_source: str = ""
    stopped: bool = False
    link: Any = None  # the runner (`checker.link.RunnerLink`), once stages.compile has started it
    runner: Any = None  # the runner process (`checker.main.RunnerProcess`): pid, how it ended

    def flag(self, flag: Flag | None) -> None:
        if flag is not None and all((f.code, f.message) != (flag.code, flag.message) for f in self.verdict.flags):
            self.verdict.flags.append(flag)

    def stop(self, status: str, error: str, stage: str | None = None) -> None:
        """The verdict is decided: later stages are skipped."""
        self.verdict.status, self.verdict.error, self.stopped = status, error, True
        if stage:
            self.verdict.stage = stage

    @contextlib.contextmanager
    def on_device(self, lock, kind: str) -> Iterator[None]:
        """Hold the device lock ("shared" for correctness work, "exclusive" for timing); the wait is
        its own stage, and the parent's stage clock does not count it against the stage's budget."""
        if lock is None:
            yield
            return
        with contextlib.ExitStack() as held:
            self.writer.progress("wait start")
            with self.timer("wait_gpu"):
                held.enter_context(lock.shared() if kind == "shared" else lock.exclusive())
            self.writer.progress("wait end")
            held.enter_context(self.lock_use.held(kind))
            self.holding = (lock, kind)
            held.callback(setattr, self, "holding", None)
            held.enter_context(self.runner_awake())
            yield

    @contextlib.contextmanager
    def runner_awake(self) -> Iterator[None]:
        """The runner continued for the duration (stopped again after), when there is one."""
        runner = self.runner
        if runner is None or not runner.frozen_between_holds:
            yield
            return
        runner.thaw()
        try:
            yield
        finally:
            runner.freeze()

    @contextlib.contextmanager
    def off_device(self, idle: Callable[[], bool]) -> Iterator[None]:
        """Inside a shared hold: give it up around work that does not touch the device (a JIT
        compile: `jitpause`), once `idle()` says the device has finished this process's work; the
        wait to take it again is stage "wait_gpu". Elsewhere (no hold, an exclusive one, or `idle()`
        False) the work runs under whatever is held."""
        lock, kind = self.holding or (None, None)
        if kind != "shared" or not idle() or not lock.let_go():
            yield
            return
        started = _perf_counter()
        try:
            yield
        finally:
            self.writer.progress("wait start")
            with self.timer("wait_gpu"):
                lock.take_again()
            self.writer.progress("wait end")
            self.lock_use.gave_up(kind, _perf_counter() - started)


def describe_exception(exc: BaseException, path: Path | None, what: str) -> str:
    line = line_in_file(exc, path) if path else None
    where = f" ({path}, line {line})" if line else ""
    text = f"{type(exc).__name__}: {exc}".strip()
    if len(text) > 1500:
        text = text[:1500] + " [...]"
    return f"{what} raised {text}{where}"


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return ""  # load_candidate reports the unreadable file


def install_build_cache(ctx: Context):
    """The build cache (a `compile.BuildRecorder`), or None when the compile module is missing."""
    kwcompile = ctx.modules.get("compile")
    if kwcompile is None:
        return None
    try:
        return kwcompile.install_build_cache(default_cache_dir(ctx.config))
    except Exception as exc:  # noqa: BLE001 - fall back to uncached builds
        ctx.notes.append(f"build cache unavailable: {exc}")
        return None
