"""The checker: the trusted process of one evaluation, `main(argv)` in the child its supervisor forks.

It holds everything that judges and nothing the candidate runs: the problem and the reference's
outputs, the inputs of every call, the comparison, the clock, the rule set's counts. The candidate
runs in its sibling, the runner (`judge.runner`), reached through the call channel
(`checker.link`). The order of work is the defence:

1. import the judge's own modules, force full fp32, load the problem (sizes overridden / shrunk);
2. compute the reference outputs of every trial (or read them from the reference store) and seal
   the baseline parameters with the supervisor;
3. ask the runner to import the candidate and build ModelNew (stages.compile);
4. call it on every trial's inputs and compare what comes back (stages.check);
5. time it on fresh inputs, a random sample of the timed calls compared too; its energy and
   kernel shares; the runner finishes; the baselines (measured with no candidate process left)
   and the floor (stages.time);
6. the profile, when asked for (its own processes, stages.profile).

Each step is a stage module of `checker.stages` with a typed result the next one takes
(`stages.records`: Loaded -> Built -> Checked). The verdict is written to the result file at
every stage (a token only this process was given proves it is the checker's), so a crash still
leaves the last stage reached; the final write happens before the process exits.

This module is imported torch-free: the supervisor imports it in the checker child before the
child's set-up and confinement (`supervisor._checker_child`), and torch loads in step 1
(`load_judge_modules`). The link and the stages bring torch, so the functions that run them import
them; `finish`, `profile` and `context` do not, and are imported here.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import jitpause, service
from ..config import JudgeConfig
from ..request import JudgeRequest, source_filename
from ..sandbox import describe_status
from ..stagetimes import StageTimer, process_age_s
from ..verdict import ERROR, FAIL, PASS, Verdict
from .stages import finish
from .stages import profile as profile_stage
from .stages.context import Context, ResultWriter, read_text

__all__ = ["ResultWriter", "RunnerProcess", "evaluate", "main", "run_stages", "spawn_runner"]

# what the supervisor tells the checker about its runner (the runner's environment has none of it)
RUNNER_FD, RUNNER_PID, RUNNER_PROBLEM, RUNNER_CANDIDATE = ("KW_RUNNER_FD", "KW_RUNNER_PID", "KW_RUNNER_PROBLEM",
                                                           "KW_RUNNER_CANDIDATE")
MPS_NOTE, RESULT_TOKEN = "KW_MPS_NOTE", "KW_RESULT_TOKEN"
RUNNER_INSTANCES = "KW_RUNNER_INSTANCES"  # a sweep's instances: the folder the supervisor wrote them under


def optional_module(name: str, notes: list[str]):
    """One of the judge's GPU-side modules (timing, compile, baseline, floor, env), or None when it
    cannot be imported; the verdict then carries a note saying so."""
    try:
        return importlib.import_module(f"kernelwright.judge.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"kernelwright.judge.{name}":
            notes.append(f"kernelwright.judge.{name} failed to import: {exc}")
        else:
            notes.append(f"kernelwright.judge.{name} is not installed")
    except Exception as exc:  # noqa: BLE001 - a broken judge module must not hide the verdict
        notes.append(f"kernelwright.judge.{name} failed to import: {type(exc).__name__}: {exc}")
    return None


# --------------------------------------------------------------------------- the runner


@dataclass
class RunnerProcess:
    """The runner of this evaluation as the checker knows it: its channel, its pid, the files it
    reads, whether a private MPS server lets this process time it (`mps_note` says why not)."""

    sock: socket.socket
    pid: int
    problem_path: Path
    candidate_path: Path
    mps_note: str = ""
    frozen_between_holds: bool = False
    finished: bool = False
    process: Any = None  # a subprocess.Popen when this process started it (no supervisor)
    last_report: dict = field(default_factory=dict)  # the runner's report when it finished
    instances: Path | None = None  # a sweep's instance files (judge/sweep.py), readable to the runner, not writable

    def loaded(self) -> None:
        """From now on the runner runs only while the device is held (`Context.runner_awake`)."""
        self.frozen_between_holds = True
        self.freeze()

    def freeze(self) -> None:
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal(signal.SIGCONT)

    def ended(self) -> None:
        self.frozen_between_holds, self.finished = False, True
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        if self.pid <= 0:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def death(self, message: str) -> str:
        """How the runner ended, for the verdict: its exit status where known, else `message`."""
        status = self.status()
        return f"the candidate's process {status}" if status else message

    def status(self) -> str:
        code = None
        if self.process is not None:
            try:
                code = self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                return ""
        elif service.available():
            try:
                code = service.call("runner_status", wait_s=5).get("code")
            except service.ServiceError:
                return ""
        return describe_status(code) if code is not None else ""

    def kill(self) -> None:
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        if self.process is not None:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def runner_from_env() -> RunnerProcess | None:
    """The runner the supervisor started for this checker."""
    fd = os.environ.get(RUNNER_FD, "")
    if not fd.isdigit():
        return None
    return RunnerProcess(socket.socket(fileno=int(fd)), int(os.environ.get(RUNNER_PID) or 0),
                         Path(os.environ.get(RUNNER_PROBLEM, "")), Path(os.environ.get(RUNNER_CANDIDATE, "")),
                         # "" (set by the supervisor): an MPS server is active; unset: none was started
                         mps_note=os.environ.get(MPS_NOTE, "no MPS server was started for this evaluation"),
                         instances=Path(os.environ[RUNNER_INSTANCES]) if os.environ.get(RUNNER_INSTANCES) else None)


def spawn_runner(problem: Path, candidate: Path, env: dict[str, str] | None = None) -> RunnerProcess:
    """A runner started from this process (no supervisor: the judge's own tools and tests), not
    confined; `python -m kernelwright.judge.runner --fd N`."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child_env = dict(os.environ)
    child_env.update(env or {})
    for name in (RUNNER_FD, RUNNER_PID, RUNNER_PROBLEM, RUNNER_CANDIDATE, MPS_NOTE, RESULT_TOKEN, RUNNER_INSTANCES):
        child_env.pop(name, None)
    process = subprocess.Popen([sys.executable, "-m", "kernelwright.judge.runner", "--fd", str(theirs.fileno())],
                               pass_fds=[theirs.fileno()], env=child_env, start_new_session=True)
    theirs.close()
    return RunnerProcess(mine, process.pid, problem.resolve(), candidate.resolve(),
                         mps_note="started without a supervisor: no MPS server", process=process)


# --------------------------------------------------------------------------- files


def materialise(request: JudgeRequest) -> tuple[Path, Path]:
    """Paths of the problem and candidate files, writing given source text into the cwd."""
    problem = Path(request.problem_path) if request.problem_path else _write_source(
        Path("problem"), request.problem_name, request.problem_source or "")
    return problem, materialise_candidate(request)


def materialise_candidate(request: JudgeRequest) -> Path:
    if request.candidate_path:
        return Path(request.candidate_path)
    return _write_source(Path("."), request.candidate_name, request.candidate_source or "")


def _write_source(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / source_filename(name)
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- the stages, in order


def run_stages(ctx: Context) -> None:
    uninstall = jitpause.install(lambda: ctx.off_device(lambda: jitpause.device_idle(ctx.verdict.device or "cpu")))
    try:
        stages_in_order(ctx)
    finally:
        uninstall()


def stages_in_order(ctx: Context) -> None:
    from .link import RunnerLink  # noqa: PLC0415 -- brings torch: this module is imported torch-free, before the checker child's set-up (module docstring)
    from .stages import check as check_stage, compile as compile_stage, load, sweep as sweep_stage, time as time_stage  # noqa: PLC0415 -- brings torch: this module is imported torch-free, before the checker child's set-up (module docstring)

    loaded = load.run(ctx)
    if loaded is None:
        return
    gpu = str(loaded.device).startswith("cuda")
    ctx.link = RunnerLink(ctx.runner.sock, loaded.device, self_time=gpu and bool(ctx.runner.mps_note),
                          timeout_s=ctx.config.timeout_s, runner_pid=ctx.runner.pid)
    if ctx.request.sweep:  # many instances of one template in this evaluation (judge/sweep.py)
        sweep_stage.run(ctx, loaded)
        time_stage.end_runner(ctx)
        return
    built = compile_stage.run(ctx, loaded)
    checked = check_stage.run(ctx, built) if built is not None else None
    if checked is None:
        return
    if ctx.config.time and ctx.verdict.status != FAIL:
        finish.finalize(ctx, final=False)
        if ctx.verdict.status == PASS:
            time_stage.run(ctx, checked)
    time_stage.end_runner(ctx)
    if ctx.config.profile and not ctx.stopped:
        finish.finalize(ctx, final=False)
        if ctx.verdict.status == PASS:
            profile_stage.run(ctx, checked)


def evaluate(request: JudgeRequest, writer: ResultWriter, modules: dict[str, Any], notes: list[str],
             timer: StageTimer | None = None, runner: RunnerProcess | None = None) -> Verdict:
    """Judge the request's candidate with `runner` (one is started from this process if None)."""
    config = JudgeConfig.from_dict(request.config)
    verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, config=config.to_dict(),
                      rules=config.rules)
    ctx = Context(request, config, verdict, writer, modules=modules, notes=notes, timer=timer or StageTimer())
    try:
        ctx.problem_path, ctx.candidate_path = materialise(request)
        ctx.candidate_source = read_text(ctx.candidate_path)
        ctx.runner = runner or spawn_runner(ctx.problem_path, ctx.candidate_path)
        run_stages(ctx)
    except Exception as exc:  # noqa: BLE001 - a judge bug: say so rather than blame the candidate
        fault = candidate_fault(ctx, exc)
        if fault:
            ctx.stop(FAIL, fault)
        else:
            ctx.stop(ERROR, "internal judge error: " + traceback.format_exc(limit=6)[-2000:])
    finally:
        close_runner(ctx)
    finish.finalize(ctx)
    return verdict


def candidate_fault(ctx: Context, exc: BaseException) -> str:
    """A CUDA fault raised in this process once the candidate's kernels have run (`link.shared_fault`:
    one MPS server, one fault for all its clients): the candidate's error, not the judge's."""
    from .link import shared_fault  # noqa: PLC0415 -- brings torch: this module is imported torch-free, before the checker child's set-up (module docstring)

    link = getattr(ctx, "link", None)
    if link is None or not getattr(link, "n", 0):
        return ""
    return shared_fault(exc)


def close_runner(ctx: Context) -> None:
    """The runner gone for good: finished if it is still answering, else killed."""
    from .stages import time as time_stage  # noqa: PLC0415 -- brings torch: this module is imported torch-free, before the checker child's set-up (module docstring)

    runner = ctx.runner
    if runner is None:
        return
    if not runner.finished and ctx.link is not None:
        time_stage.end_runner(ctx)
    runner.ended()
    if runner.process is not None:
        runner.kill()
    runner.sock.close()


def compile_only(request: JudgeRequest, writer: ResultWriter, modules: dict[str, Any],
                 runner: RunnerProcess | None = None) -> Verdict:
    """Phase A of the pool: the runner imports the candidate so its extensions land in the shared
    build cache."""
    from .link import RunnerLink  # noqa: PLC0415 -- brings torch: this module is imported torch-free, before the checker child's set-up (module docstring)
    from .stages import compile as compile_stage  # noqa: PLC0415 -- brings torch: this module is imported torch-free, before the checker child's set-up (module docstring)

    config = JudgeConfig.from_dict(request.config)
    verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, stage="compile",
                      config=config.to_dict())
    ctx = Context(request, config, verdict, writer, modules=modules)
    try:
        ctx.problem_path, ctx.candidate_path = materialise(request)
        ctx.candidate_source = read_text(ctx.candidate_path)
        ctx.runner = runner or spawn_runner(ctx.problem_path, ctx.candidate_path)
        ctx.link = RunnerLink(ctx.runner.sock, "cpu", timeout_s=config.compile_timeout_s, runner_pid=ctx.runner.pid)
        compile_stage.compile_only(ctx)
    finally:
        close_runner(ctx)
    return verdict


# --------------------------------------------------------------------------- entry point


def load_judge_modules(notes: list[str]) -> dict[str, Any]:
    """Step 1: the judge's own modules. Importing torch._dynamo now keeps its import-time patches
    (it wraps torch.manual_seed) out of this process's later behaviour."""
    from .. import guards  # noqa: PLC0415 -- step 1 itself: guards brings torch, loaded here, after the checker child's set-up and confinement (supervisor._checker_child)

    guards.die_with_parent()
    guards.apply_rlimits_from_env()
    guards.apply_thread_count()
    modules = {name: optional_module(name, notes) for name in ("timing", "compile", "baseline", "floor", "env")}
    try:
        import torch._dynamo  # noqa: F401,PLC0415 -- step 1: dynamo's import-time patches taken now, after the guards; it may be absent
    except Exception as exc:  # noqa: BLE001 - dynamo is optional for the judge itself
        notes.append(f"torch._dynamo unavailable: {exc}")
    return {k: v for k, v in modules.items() if v is not None}


def read_token() -> str:
    """The result file's token: from the supervisor (the runner never sees it), else stdin."""
    token = os.environ.pop(RESULT_TOKEN, "")
    if token:
        return token
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        return sys.stdin.readline().strip()
    except (OSError, ValueError):
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelwright.judge.checker", description=__doc__.split("\n")[0])
    parser.add_argument("request", help="request JSON written by kernelwright.judge.api")
    parser.add_argument("--phase", choices=("evaluate", "compile"), default="evaluate")
    args = parser.parse_args(argv)
    timer = StageTimer()
    startup = process_age_s()
    if startup is not None:
        timer.seconds["startup"] = startup  # interpreter start and the judge's first imports
    token = read_token()
    request = JudgeRequest.load(args.request)
    writer = ResultWriter(request, token, timer)
    notes: list[str] = []
    with timer("imports"):
        modules = load_judge_modules(notes)
    if "env" in modules:  # the environment names no cache: the request does
        modules["env"].use_cache_root(request.config.get("cache_dir"))
    runner = runner_from_env()
    if args.phase == "compile":
        verdict = compile_only(request, writer, modules, runner)
        verdict.stage_seconds.update(timer.rounded())
    else:
        verdict = evaluate(request, writer, modules, notes, timer, runner)
    writer.write(verdict, complete=True)
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
