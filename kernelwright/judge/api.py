"""`judge(problem, candidate, config) -> Verdict`: one candidate, one fresh sandboxed process.

The caller's process never imports candidate code. It writes a request file, runs
`python -m kernelwright.judge.supervisor REQUEST.json` in the sandbox (the supervisor forks the
runner, where the candidate runs, and the checker, `judge.checker.main`, which judges it, and
reaps what they leave), and reads the verdict the checker wrote and the supervisor's record. When
the judge's processes die (timeout, OOM kill) the last stage the checker reported and the tails
of their output become the verdict instead. Around the run the judge's trusted files are checked
(`trusted`). Nothing here raises for a bad candidate.

Scratch folder of one evaluation: `request.json` (read-only to the checker, unreadable to the
runner), `work/` (the checker's cwd, HOME, TMPDIR), `out/` (result and progress files, the
checker's), `runner/` (the runner's cwd, HOME, TMPDIR, caches and copy of the candidate),
`trusted/` (the supervisor's: record, service socket, MPS folders, a trusted copy of a problem
given as text).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import sandbox, trusted
from . import supervisor as supervisor_files
from .candidate_kinds import missing_names
from .checks import check_flag
from .config import JudgeConfig
from .confine import ConfinementReport
from .locate import attach_fault
from .request import JudgeRequest, SourceText, default_cache_dir, make_request, source_filename
from .sandbox import SIGNAL_MEANING, signal_of
from .scheduling import forkserver
from .sweep import settle, sweep_config
from .toolchain import resolve_arch_list
from .verdict import ERROR, FAIL, INFO, REJECT, STAGES, WARN, CompileResult, Flag, ProcessInfo, Verdict

PACKAGE_ROOT = Path(__file__).resolve().parents[2]
# stages after which a crash is the candidate's failure rather than a failure to evaluate it
_RUNNING_STAGES = ("check", "time", "profile")


def worker_env(config: JudgeConfig, device_hint: str, extra: dict[str, str] | None = None,
               workdir: Path | None = None) -> dict[str, str]:
    """The candidate's compile caches in its own work folder (Triton kernels, the extensions torch
    builds without the judge's builder, Inductor, the CUDA JIT: a candidate must not write what
    another one loads; the shared build cache is reached through the supervisor), the package on
    the path, the CUDA arch list every build of this run is made (and hashed) for, and CPU
    allocation poisoning for CPU runs. No cache path, no parent pid."""
    caches = (workdir or Path(tempfile.gettempdir())) / ".cache"
    env = {
        "TORCH_EXTENSIONS_DIR": str(caches / "torch_extensions"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "CUDA_CACHE_PATH": str(caches / "nv"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")])),
    }
    arch = run_arch_list(config, device_hint)
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
    if device_hint == "cpu":
        env["MALLOC_PERTURB_"] = "1"  # fresh allocations read as poison (see guards.enable_malloc_perturb)
        if "TRITON_INTERPRET" not in os.environ:
            env["TRITON_INTERPRET"] = "1"  # Triton kernels run on CPU tensors only through its interpreter
    env.update(extra or {})
    return env


def warm_launcher(config: JudgeConfig, force: bool = False, env: dict[str, str] | None = None):
    """A `forkserver.Launcher` for evaluations under `config` (started in the background), or None
    when warm starts are turned off and not `force`d ($KW_JUDGE_WARM=0). On the H100 (2026-11-24)
    they passed the GPU judge and integrity tests and the adversarial set under every rule set, and
    cut the imports stage from 8-13 s to 0 per candidate (docs/benchmarks.md). `env`: the extra
    environment the evaluations are judged with (as `judge(env=...)`), e.g. another PYTHONPATH."""
    setting = os.environ.get("KW_JUDGE_WARM", "").strip().lower()
    if not force and setting in ("0", "off", "no", "false"):
        return None

    extra = env or {}
    env = sandbox.scrubbed_environ()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))
    env.update({k: v for k, v in extra.items() if k in ("PYTHONPATH",)})
    if device_hint(config, extra) == "cpu" and "TRITON_INTERPRET" not in os.environ:
        env["TRITON_INTERPRET"] = "1"  # as worker_env sets it for CPU evaluations: triton imported in that mode
    package = trusted.package_of(env["PYTHONPATH"], PACKAGE_ROOT / "kernelwright")
    trusted.compile_package(package)  # before the server imports it: no bytecode is written later
    return forkserver.Launcher(env, config.no_network, package)


def run_arch_list(config: JudgeConfig, device_hint: str) -> str:
    """The TORCH_CUDA_ARCH_LIST of this run, the same for the precompile and the evaluation phase:
    the config's, else the environment's, else (GPU runs) the GPUs' capabilities; "" for none."""
    if config.cuda_arch_list:
        return config.cuda_arch_list
    if device_hint == "cpu":
        return os.environ.get("TORCH_CUDA_ARCH_LIST", "")

    return resolve_arch_list(None)


class StageClock:
    """Per-stage deadlines, read from the worker's progress file while it runs.

    Loading and compiling get `compile_timeout_s` (building an extension is slow the first time);
    checking, timing and profiling get `timeout_s` each, counted from the stage's start; computing
    baselines (torch.compile of the reference) gets `compile_timeout_s` again. Waiting for the
    device lock (other workers are timing) is not the candidate's time: between "wait start" and
    "wait end" only the overall backstop applies, and the stage's deadline moves by the wait (a
    stage that takes the lock many times, one trial at a time, keeps one budget for its own work).
    """

    def __init__(self, progress_path: Path, config: JudgeConfig):
        self.path, self.config = progress_path, config
        self.stage, self.trial, self.since = "load", "", None
        self.waiting = False
        self._wait_started: float | None = None
        self._offset = 0

    def __call__(self, start: float) -> float:
        self.refresh()
        if self.waiting:
            return float("inf")
        since = self.since or start
        return since + self.budget()

    def budget(self) -> float:
        running = self.stage in _RUNNING_STAGES
        return self.config.timeout_s if running else self.config.compile_timeout_s

    def refresh(self) -> None:
        """Read the lines added since the last call (complete lines only)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return
        complete = data[:data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            self._apply(line)

    def _apply(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "stage" and rest != self.stage:
            self.stage, self.trial, self.since = rest, "", time.monotonic()
        elif kind == "baseline" and self.stage != "baseline":
            self.stage, self.since = "baseline", time.monotonic()
        elif kind == "trial":
            self.trial = rest
        elif kind == "wait":
            now = time.monotonic()
            if rest == "start":
                self.waiting, self._wait_started = True, now
            elif self.waiting:
                self.waiting = False
                waited = now - (self._wait_started or now)
                # the stage's budget counts only the time it had the device (or needed none)
                self.since = now if self.since is None else self.since + waited


def outer_timeout(config: JudgeConfig) -> float:
    """A backstop over all stage budgets together."""
    return 3 * config.compile_timeout_s + 3 * config.timeout_s


def judge(problem, candidate, config: JudgeConfig | None = None, *, env: dict[str, str] | None = None,
          scratch_root: str | Path | None = None, launcher=None) -> Verdict:
    """Judge `candidate` against `problem` (file paths or `SourceText`) in a fresh sandboxed process
    (forked from `launcher`'s fork server when one is given, see `warm_launcher`)."""
    config = config or JudgeConfig()
    scratch = Path(tempfile.mkdtemp(prefix="kw-judge-", dir=scratch_root))
    try:
        request = make_request(problem, candidate, config, scratch)
        return run_request(request, config, scratch, env, launcher=launcher)
    finally:
        if not os.environ.get("KW_KEEP_SCRATCH"):
            shutil.rmtree(scratch, ignore_errors=True)


def judge_sweep(problem, instances: list, config=None, *, env: dict[str, str] | None = None,
                scratch_root: str | Path | None = None, launcher=None) -> tuple[Any, Verdict]:
    """Benchmark `instances` of one template against `problem` (a path or `api.SourceText`) in ONE
    sandboxed evaluation; (the sweep's record, the evaluation's verdict). Never raises for bad
    instances: a configuration the evaluation did not finish is `running` in the verdict it left,
    and is recorded here as timed out or crashed (the evaluation's error says which)."""
    if not instances:
        raise ValueError("a sweep needs at least one instance")
    config = sweep_config(config or JudgeConfig())
    scratch = Path(tempfile.mkdtemp(prefix="kw-sweep-", dir=scratch_root))
    try:
        request = make_request(problem, SourceText(instances[0].source, "sweep"), config, scratch)
        request.sweep = [{"params": dict(i.params), "source": i.source} for i in instances]
        verdict = run_request(request, config, scratch, env, launcher=launcher)
    finally:
        if not os.environ.get("KW_KEEP_SCRATCH"):
            shutil.rmtree(scratch, ignore_errors=True)
    return settle(instances, verdict), verdict


def run_request(request: JudgeRequest, config: JudgeConfig, scratch: Path, env: dict[str, str] | None,
                launcher=None, *, wrap: list[str] | None = None, wall_s: float | None = None,
                locate: bool = True) -> Verdict:
    """Run one prepared request in the sandbox; `launcher` (a `forkserver.Launcher`) starts it warm.
    `wrap`: a command the supervisor runs under (the locating rerun's compute-sanitizer), `wall_s`:
    a limit on the whole run below the stage budgets' backstop. A candidate that failed with an
    asynchronous CUDA fault gets `verdict.fault` from a rerun that locates it (`locate`), unless
    `locate` is False (that rerun itself)."""
    if request.phase == "evaluate":
        early = precheck(request, config)
        if early is not None:
            return early
    refused = trusted.compromised()
    if refused:
        return Verdict(problem=request.problem_label, candidate=request.candidate_label, status=ERROR,
                       error=f"this judge process judges no more: {refused}; check the files and start it again",
                       config=config.to_dict())

    request_path = scratch / "request.json"
    request.save(request_path)
    (scratch / supervisor_files.TRUSTED_FOLDER).mkdir(exist_ok=True)
    token = secrets.token_hex(16)
    clock = StageClock(Path(request.progress_path), config)
    workdir = scratch / "work"
    child_env = worker_env(config, device_hint(config, env), env, workdir=workdir)
    parent = str(os.getpid()) if not wrap else "0"  # under a wrapper its parent is the wrapper
    spec = sandbox.SandboxSpec(
        argv=[*(wrap or []), sys.executable, "-m", "kernelwright.judge.supervisor", str(request_path),
              "--phase", request.phase, "--parent-pid", parent],
        workdir=workdir, timeout_s=min(outer_timeout(config), wall_s or float("inf")),
        output_limit_bytes=config.output_limit_bytes,
        env=child_env, no_network=config.no_network, address_space_bytes=_address_space(config, env),
        stdin_text=token + "\n", deadline=clock, stop_grace_s=STOP_GRACE_S, launcher=launcher,
    )
    files = trusted_files(config, child_env)
    before = files.snapshot()
    info = sandbox.run(spec)
    record_supervision(info, supervisor_files.read_report(scratch))
    clock.refresh()
    verdict = assemble(request, read_result(Path(request.result_path), token), info, clock, config)
    check_trusted_files(verdict, files, before, info.confined)
    record_overhead(verdict, info)
    if locate and request.phase == "evaluate":
        attach_fault(verdict, request, config, env, rerun=rerun)
    return verdict


def rerun(request: JudgeRequest, config: JudgeConfig, env: dict[str, str] | None, wrap: list[str] | None,
          wall_s: float) -> Verdict:
    """The request's candidate judged again under `config` in a fresh scratch folder, started cold
    (no fork server: `env` reaches a fresh process), under `wrap`, within `wall_s`; nothing of it is
    located again (the rerun of `locate.attach_fault`)."""
    scratch = Path(tempfile.mkdtemp(prefix="kw-locate-"))
    try:
        problem = request.problem_path or SourceText(request.problem_source or "", request.problem_name)
        candidate = request.candidate_path or SourceText(request.candidate_source or "", request.candidate_name)
        again = make_request(problem, candidate, config, scratch)
        return run_request(again, config, scratch, env, launcher=None, wrap=wrap, wall_s=wall_s, locate=False)
    finally:
        if not os.environ.get("KW_KEEP_SCRATCH"):
            shutil.rmtree(scratch, ignore_errors=True)


STOP_GRACE_S = 5.0  # at a time limit, the supervisor's time to kill its tree and write its record


def trusted_files(config: JudgeConfig, child_env: dict[str, str]) -> trusted.TrustedFiles:
    """The package the worker imports and the cache it reads, compiled once so no trusted process
    writes bytecode into the package while candidates run."""
    package = trusted.package_of(child_env.get("PYTHONPATH"), PACKAGE_ROOT / "kernelwright")
    trusted.compile_package(package)
    return trusted.TrustedFiles(package, default_cache_dir(config).expanduser().resolve())


def record_supervision(info: ProcessInfo, record) -> None:
    """The supervisor's record in the verdict: confinement, processes killed, trusted rewrites."""
    if record is None:
        info.isolation["confinement"] = "unknown: the supervisor left no record (killed before it finished)"
        info.isolation["filesystem"] = "unknown"
        return

    known = ConfinementReport.__dataclass_fields__
    report = ConfinementReport(**{k: v for k, v in record.confinement.items() if k in known})
    info.confined = report.active and report.threads == 1
    info.killed_processes = record.killed
    info.isolation["confinement"] = report.to_dict()
    info.isolation["filesystem"] = report.summary()
    info.isolation["descendants"] = (
        f"every process left in the tree is killed when the worker ends (child subreaper: "
        f"{'yes' if record.subreaper else 'refused'}); killed {record.killed} of the candidate's"
        + (f", {record.killed_other} of the judge's" if record.killed_other else ""))
    info.isolation["not_enforced"] = [n for n in info.isolation.get("not_enforced", [])
                                      if not (info.confined and n == "filesystem isolation")]
    info.isolation["supervisor_seconds"] = record.seconds
    info.isolation["mps"] = record.mps or "none"
    checker = ConfinementReport(**{k: v for k, v in (record.checker_confinement or {}).items() if k in known})
    info.isolation["checker"] = checker.summary()
    if record.launched:  # the profile's processes, each confined afresh by the supervisor's launcher
        info.isolation["profiled_processes"] = [_launched(entry) for entry in record.launched]
    if record.network:
        info.isolation["profile_network"] = record.network
    if record.notes:
        info.isolation["supervisor_notes"] = record.notes
    trusted.note_trusted(record.rewrote)


def _launched(entry: dict) -> dict:
    report = entry.get("confinement") or {}
    return {"action": entry.get("action"), "confined": bool(report.get("active")),
            "mechanism": report.get("mechanism", ""), "own_proc_writable": "/proc/self" in (report.get("devices") or []),
            "capabilities": report.get("capabilities", ""), "reason": report.get("reason", ""),
            "returncode": entry.get("returncode"), "seconds": entry.get("seconds")}


def check_trusted_files(verdict: Verdict, files: trusted.TrustedFiles, before: dict, confined: bool) -> None:
    """Changes to the judge's package or cache records during this evaluation: the changed cache
    entries are removed; an unconfined candidate is failed for them (and a changed package stops
    this judge); a confined one could not have made them and is only told."""
    changes = files.changes(before, files.snapshot())
    if not confined and not changes:
        isolation = verdict.process.isolation if verdict.process else {}
        reason = (isolation.get("confinement") or {}).get("reason") if isinstance(isolation.get("confinement"), dict) else ""
        how = reason or isolation.get("filesystem", "unknown")  # why first: the summary is long
        verdict.flags.append(Flag("unconfined", WARN, f"candidate code ran without filesystem confinement ({how}); "
                                  "the judge's files were checked after it and were unchanged"))
    if not changes:
        return
    removed = trusted.invalidate(changes.caches, files.cache)
    what = changes.describe() + (f"; removed {len(removed)} cache entries" if removed else "")
    if confined:
        verdict.flags.append(Flag("judge_note", INFO, f"{what} changed while this candidate ran confined "
                                  "(it could not write there: another process did)"))
        return
    if changes.package:
        trusted.compromise(f"the judge's package changed while an unconfined candidate ran ({changes.describe()})")
    message = f"the judge's trusted files changed while this candidate ran unconfined: {what}"
    verdict.flags.append(check_flag("trusted_files", REJECT, message))
    verdict.status, verdict.error = FAIL, message


def record_overhead(verdict: Verdict, info: ProcessInfo) -> None:
    """stage_seconds["overhead"]: the worker's wall time that no stage accounts for (process
    start-up before Python runs, sandbox set-up, exit)."""
    if verdict.stage_seconds and info.wall_s:
        other = info.wall_s - sum(v for k, v in verdict.stage_seconds.items() if k != "overhead")
        verdict.stage_seconds["overhead"] = round(max(other, 0.0), 3)


def precheck(request: JudgeRequest, config: JudgeConfig) -> Verdict | None:
    """Files that cannot even be parsed, or lack the names the judge needs, get their verdict here,
    in the caller's process, without starting a worker (read as text: nothing is executed)."""
    problem = _text(request.problem_path, request.problem_source)
    candidate = _text(request.candidate_path, request.candidate_source)
    problem_file = request.problem_path or f"problem/{source_filename(request.problem_name)}"
    candidate_file = request.candidate_path or source_filename(request.candidate_name)
    checks = ((problem_file, problem, ("Model", "get_inputs", "get_init_inputs"), "load", "a problem file"),
              (candidate_file, candidate, ("ModelNew",), "compile", "the candidate"))
    for label, text, names, stage, what in checks:
        if text is None:
            continue  # unreadable: the worker reports it with the loader's wording
        message = missing_names(label, text, names, what)
        if message:
            verdict = Verdict(problem=request.problem_label, candidate=request.candidate_label, status=ERROR,
                              stage=stage, error=message, config=dict(request.config))
            if stage == "compile":
                verdict.compile = CompileResult(ok=False, log=message, errors=[message])
                verdict.error = f"the candidate does not load: {message}"
            return verdict
    return None


def _text(path: str | None, source: str | None) -> str | None:
    if source is not None:
        return source
    try:
        return Path(path).read_text() if path else None
    except (OSError, UnicodeDecodeError):
        return None


def device_hint(config: JudgeConfig, env: dict[str, str] | None) -> str:
    if config.device != "auto":
        return config.device
    visible = (env or {}).get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if visible == "" or visible == "-1" or not _has_gpu():
        return "cpu"
    return "cuda"


def _has_gpu() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*"))


def _address_space(config: JudgeConfig, env) -> int | None:
    if config.cpu_memory_limit_mb and device_hint(config, env) == "cpu":
        return int(config.cpu_memory_limit_mb) << 20
    return None


@dataclass
class WorkerResult:
    verdict: Verdict | None
    complete: bool = False
    problem: str = ""  # why the file could not be used, if it could not


def read_result(path: Path, token: str) -> WorkerResult:
    """The worker's result file, checked for the token only the worker was told (on its stdin)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return WorkerResult(None, problem="missing")
    except (OSError, ValueError) as exc:
        return WorkerResult(None, problem=f"unreadable ({exc})")
    if data.get("token") != token:
        return WorkerResult(None, problem="forged")
    try:
        verdict = Verdict.from_dict(data["verdict"]) if data.get("verdict") else None
    except (TypeError, ValueError, KeyError) as exc:
        return WorkerResult(None, problem=f"invalid ({exc})")
    return WorkerResult(verdict, complete=bool(data.get("complete")))


def assemble(request: JudgeRequest, result: WorkerResult, info: ProcessInfo, clock: StageClock,
             config: JudgeConfig) -> Verdict:
    """The verdict the worker wrote, or one built from how the worker process ended."""
    verdict = result.verdict or Verdict(problem=request.problem_label, candidate=request.candidate_label,
                                        config=config.to_dict())
    verdict.process = info
    if result.problem == "forged":
        verdict.status, verdict.error = FAIL, ("the result file did not carry the judge's token: something other "
                                               "than the judge's checker wrote it (the candidate may have forged it)")
        verdict.flags.append(check_flag("verdict_token", REJECT, verdict.error))
        return verdict
    if result.complete and not info.timed_out:
        add_last_output(verdict, info, request)
        return verdict
    if clock.stage == "baseline" and result.verdict is not None:
        # the candidate was fully judged; only the judge's own baseline measurement did not finish
        verdict.flags.append(Flag("baseline_unavailable", INFO, describe_death(info, clock, request, result.problem)))
        verdict.stage = "done"
        return verdict
    verdict.stage = clock.stage if clock.stage in STAGES else verdict.stage
    verdict.status = FAIL if clock.stage in _RUNNING_STAGES else ERROR
    verdict.error = describe_death(info, clock, request, result.problem)
    return verdict


RUNNER_DIED = "the candidate's process"  # how the checker's verdict names the runner's death


def add_last_output(verdict: Verdict, info: ProcessInfo, request: JudgeRequest) -> None:
    """A verdict whose runner died gets the lines of the output that say where (a faulthandler dump
    names the candidate's line): the checker wrote it without seeing that output."""
    if verdict.error and RUNNER_DIED in verdict.error and "Last output:" not in verdict.error:
        hint = relevant_lines(info.stderr_tail, request.candidate_label)
        if hint:
            verdict.error += f". Last output: {hint}"


def describe_death(info: ProcessInfo, clock: StageClock, request: JudgeRequest, problem: str) -> str:
    """One paragraph: how the worker ended, where, and the lines of its output that say why."""
    where = f"in the {clock.stage} stage" + (f" (trial {clock.trial})" if clock.trial else "")
    if info.timed_out:
        what = (f"timed out {where} after {clock.budget():g} s: the candidate hangs or is far too slow; "
                "the whole process group was killed")
    elif info.signal or signal_of(info.exit_code):
        name = info.signal or signal_of(info.exit_code)
        what = f"the judge process was killed by {name} ({SIGNAL_MEANING.get(name, 'a fatal signal')}) {where}"
    elif info.exit_code is None:
        what = f"the judge process could not start: {info.stderr_tail.strip()}"
    else:
        note = f" (result file {problem})" if problem else ""
        what = (f"the judge process exited with code {info.exit_code} {where} without finishing its verdict{note}; "
                "the candidate may have called sys.exit() or os._exit()")
    hint = relevant_lines(info.stderr_tail, request.candidate_label)
    return what + (f". Last output: {hint}" if hint else ".")


_PROFILER_LOG = re.compile(r"^(USDT|INFO|WARNING|STAGE):\d{4}-\d\d-\d\d ")  # the runner's profiler (kineto) logging


def relevant_lines(stderr: str, candidate_label: str, limit: int = 6) -> str:
    """The candidate's own frames from a faulthandler dump, else the last few lines of stderr."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not _PROFILER_LOG.match(line.strip())]
    name = Path(candidate_label).name
    own = [line for line in lines if name and name in line]
    chosen = own[-limit:] if own else lines[-limit:]
    return " | ".join(chosen)[-1500:]
