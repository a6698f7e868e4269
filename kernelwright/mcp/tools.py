"""The server's tools: thin wrappers over kernelwright's Python API.

Each tool validates its arguments (`validation`, `workspace`), calls the API, and answers with a
JSON object (structured content, and the same JSON as text for clients that read only text). A
refused input, or a failure of the server itself, is a structured tool error: `is_error` with
`{"error": {"code", "message", "field"}}`; nothing a client sends can end the server.

Candidates are judged by `kernelwright.judge.api.judge`, the sandboxed worker process the CLI uses;
this process only reads the candidate as text. Long calls (judge, profile, baseline, device_info)
report progress while they run.
"""
# no `from __future__ import annotations`: the MCP SDK reads these signatures at run time
import dataclasses
import difflib
import functools
import inspect
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any, Callable

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from kernelwright.cli.skills_cmd import DEFAULT_USER_DIR
from kernelwright.judge import JudgeConfig
from kernelwright.judge.api import judge
from kernelwright.judge.request import SourceText
from kernelwright.memory import Conditions, SkillLibrary
from kernelwright.memory.skills import OP_KINDS

from . import validation as check
from .jobs import JobError, run_job
from .progress import JudgeStages, run_blocking
from .runs import RunManager
from .summaries import baselines_summary, profile_summary, trim, verdict_summary
from .validation import INTERNAL, NOT_FOUND, UNSUPPORTED, ToolInputError
from .workspace import Workspace

log = logging.getLogger(__name__)
PROFILE_TRIALS = 2  # a profile needs a passing candidate; `judge` is the place for a full verdict
DEVICE_TIMEOUT_S = 180.0
BOTTLENECKS = ("memory", "compute", "latency", "launch", "host", "any")

Problem = Annotated[str, Field(description="problem file in KernelBench format (Model, get_inputs, "
                                           "get_init_inputs), relative to the workspace")]
Code = Annotated[str, Field(description="the candidate: full Python source of a module defining ModelNew "
                                        "(Triton or CUDA C++ via load_inline)")]
Sizes = Annotated[dict[str, int | float] | None,
                  Field(description="problem size constants to override, e.g. {\"batch_size\": 16}")]
RunRef = Annotated[str, Field(description="run name (as optimize_start returned it) or run folder in the workspace")]


def ok(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, indent=1, default=str))],
                          structured_content=data)


def refused(error: ToolInputError) -> CallToolResult:
    data = {"error": error.to_dict()}
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, indent=1))],
                          structured_content=data, is_error=True)


def answers(method: Callable) -> Callable:
    """A tool method returning a dict, as an MCP tool returning a `CallToolResult` (errors included)."""
    @functools.wraps(method)
    async def tool(*args, **kwargs) -> CallToolResult:
        try:
            return ok(await method(*args, **kwargs))
        except ToolInputError as exc:
            return refused(exc)
        except JobError as exc:
            return refused(ToolInputError(INTERNAL, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a bug of the server must not end the session
            log.exception("tool %s failed", method.__name__)
            return refused(ToolInputError(INTERNAL, f"the server failed: {type(exc).__name__}: {trim(str(exc), 500)}"))

    tool.__signature__ = inspect.signature(method).replace(return_annotation=CallToolResult)
    tool.__annotations__ = {**method.__annotations__, "return": CallToolResult}
    return tool


class Tools:
    """The tools of one server; `server.build_server` registers every public coroutine below."""

    def __init__(self, ws: Workspace, runs: RunManager | None = None):
        self.ws = ws
        self.runs = runs or RunManager(ws)
        self.limiter = anyio.CapacityLimiter(ws.limits.judge_slots)
        self._skills = None

    # ---- judging -------------------------------------------------------------------------------

    async def judge(self, ctx: Context, problem: Problem, candidate_code: Code,
                    rules: Annotated[str | None, Field(description="rule set to judge by, where this judge has "
                                                                   "rule sets (e.g. kernelbench, library, strict)")] = None,
                    trials: Annotated[int | None, Field(description="correctness trials, 1-50 (default 5)")] = None,
                    sizes: Sizes = None,
                    time: Annotated[bool, Field(description="time a passing candidate against eager PyTorch and "
                                                            "torch.compile; false checks correctness only")] = True,
                    ) -> dict[str, Any]:
        """Judge a candidate ModelNew against a problem in the judge's sandbox (a fresh process, no
        network), exactly as `kernelwright judge` does. Returns the verdict for a model: status
        (pass / fail / error), stage reached, error (trimmed, naming the candidate's line), compile
        result, correctness trials (failing ones with their errors), guard flags, median time,
        eager and torch.compile baselines, speedups, and the speed-of-light floor with the % of it
        reached. Without a GPU, Triton runs in its interpreter on shrunk sizes and times are CPU wall
        time (the verdict says so)."""
        path = self.ws.problem_file(problem)
        code = check.text(candidate_code, "candidate_code", self.ws.limits.code_bytes)
        config = self._config(rules=rules, trials=trials, sizes=sizes, time=time)
        verdict = await self._judge(ctx, path, code, config)
        return {"problem": self.ws.shown(path), **verdict_summary(verdict)}

    async def profile(self, ctx: Context, problem: Problem, candidate_code: Code, sizes: Sizes = None,
                      ) -> dict[str, Any]:
        """Profile a candidate through the judge's sandbox: it is checked first (2 trials), and a
        passing one is profiled (torch-profiler timeline, then ncu stage 1 and 2 on a GPU). Returns
        the bottleneck class (memory, compute, latency, launch, host), ranked findings with the
        numbers behind them and the skills they point to, and each hot kernel's share of GPU time,
        class and reason. Without a GPU or ncu, what could not be measured is said in the findings."""
        path = self.ws.problem_file(problem)
        code = check.text(candidate_code, "candidate_code", self.ws.limits.code_bytes)
        config = self._config(trials=PROFILE_TRIALS, sizes=sizes, time=False, profile=True)
        verdict = await self._judge(ctx, path, code, config)
        summary = verdict_summary(verdict)
        out = {"problem": self.ws.shown(path), "status": summary["status"],
               "verdict": {k: summary[k] for k in ("status", "stage", "error", "trials", "flags", "device")},
               "profile": profile_summary(verdict.get("profile"))}
        if out["profile"] is None:
            out["message"] = "not profiled: only a candidate that passes the judge is profiled"
        return out

    async def baseline(self, ctx: Context, problem: Problem, sizes: Sizes = None) -> dict[str, Any]:
        """Time the problem's reference under eager PyTorch and (on a GPU) torch.compile, as the
        judge's baselines (cached on disk; a child process runs the problem, never the server).
        Returns the device, the sizes timed (shrunk on a CPU, as a verdict's are), one timing per
        baseline (median, IQR, n, method) and any baseline that could not run with its reason."""
        path = self.ws.problem_file(problem)
        values = check.sizes(sizes, self.ws.limits)
        timeout = 2 * self._config().compile_timeout_s + 60
        work = functools.partial(run_job, ["baseline", str(path), "--sizes", json.dumps(values)], timeout, self.ws.root)
        data = await run_blocking(ctx, work, lambda: "timing the reference", limiter=self.limiter)
        return {"problem": self.ws.shown(path), **baselines_summary(data)}

    async def device_info(self, ctx: Context) -> dict[str, Any]:
        """What candidates are judged on here: the device (GPU name, capability, SMs, memory, driver,
        CUDA runtime; or the CPU), torch / Triton / Python / nvcc versions, the copy-bandwidth and
        matmul peaks the speed-of-light floor uses (measured, or datasheet values and labelled so),
        whether ncu is available for profiles, and whether the sandbox can cut the network."""
        work = functools.partial(run_job, ["device"], DEVICE_TIMEOUT_S, self.ws.root)
        return await run_blocking(ctx, work, lambda: "reading the device")

    def _config(self, rules: str | None = None, trials: int | None = None, sizes: dict | None = None,
                time: bool = True, profile: bool = False):
        values: dict[str, Any] = {"overrides": check.sizes(sizes, self.ws.limits), "time": bool(time),
                                  "profile": profile}
        if trials is not None:
            values["trials"] = check.integer(trials, "trials", 1, self.ws.limits.max_trials)
        if rules is not None:
            if "rules" not in {f.name for f in dataclasses.fields(JudgeConfig)}:
                raise ToolInputError(UNSUPPORTED, "this kernelwright's judge has no rule sets; leave `rules` out",
                                     "rules")
            values["rules"] = check.text(rules, "rules", 64).strip()
        try:
            return dataclasses.replace(JudgeConfig(), **values)
        except (TypeError, ValueError) as exc:
            raise ToolInputError(check.BAD_VALUE, f"judge settings refused: {exc}") from None

    async def _judge(self, ctx: Context, problem: Path, code: str, config) -> dict[str, Any]:
        """The verdict (as a dict) of one sandboxed judge run; progress names the worker's stage."""
        scratch = Path(tempfile.mkdtemp(prefix="kw-mcp-"))
        try:
            work = functools.partial(judge, problem, SourceText(code, name="candidate"), config, scratch_root=scratch)
            verdict = await run_blocking(ctx, work, JudgeStages(scratch, config), limiter=self.limiter)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return json.loads(verdict.to_json())

    # ---- skills --------------------------------------------------------------------------------

    def library(self):
        if self._skills is None:
            folders = [DEFAULT_USER_DIR] if DEFAULT_USER_DIR.is_dir() else []
            self._skills = SkillLibrary.load(folders, encoder=None)
        return self._skills

    async def skills_search(self, query: Annotated[str, Field(description="what you are optimising or seeing, "
                                                                          "e.g. 'row softmax memory-bound'")],
                            op_kinds: Annotated[list[str] | None, Field(description="op kinds, e.g. [softmax], "
                                                                                    "[matmul, elementwise]")] = None,
                            bottleneck: Annotated[str | None, Field(description="memory, compute, latency, "
                                                                                "launch or host")] = None,
                            backend: Annotated[str | None, Field(description="triton or cuda")] = None,
                            k: Annotated[int, Field(description="at most this many skills (1-20)")] = 5,
                            ) -> dict[str, Any]:
        """Search the skill library (optimisation techniques written for kernel work: when they apply,
        steps, pitfalls, an example) by BM25 over the query, filtered by op kinds, bottleneck and
        backend. Returns the best matches with name, title, conditions, tags and the "When" section;
        read one whole with `skill`. Only reviewed (trusted) skills are returned."""
        words = check.text(query, "query", self.ws.limits.query_chars, allow_empty=True)
        kinds = check.string_list(op_kinds, "op_kinds", OP_KINDS)
        limit = check.integer(k, "k", 1, self.ws.limits.max_results)
        conditions = Conditions(op_kinds=kinds or None,
                                bottleneck=check.choice(bottleneck, "bottleneck", BOTTLENECKS) if bottleneck else None,
                                backend=check.choice(backend, "backend", ("triton", "cuda", "any")) if backend else None)
        found = self.library().retrieve(words, conditions, k=limit)
        return {"query": words, "skills": [_skill_entry(s, full=False) for s in found]}

    async def skill(self, name: Annotated[str, Field(description="skill name, e.g. vectorized-access")]) -> dict[str, Any]:
        """One skill in full: name, title, when it applies (op kinds, bottleneck, backend, GPU), tags,
        and its Markdown body (When, Steps, Pitfalls, Example)."""
        wanted = check.skill_name(name)
        found = self.library().get(wanted)
        if found is None or not found.trusted:
            close = difflib.get_close_matches(wanted, sorted(self.library().names()), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; search with skills_search"
            raise ToolInputError(NOT_FOUND, f"no skill named {wanted!r}{hint}", "name")
        return _skill_entry(found, full=True)

    # ---- optimize runs -------------------------------------------------------------------------

    async def optimize_start(self, problem: Problem,
                             budget: Annotated[int, Field(description="judge evaluations the run may spend "
                                                                      "(its hard limit), 1-500")] = 8,
                             llm: Annotated[str | None, Field(description="LLM spec for the agents, e.g. "
                                                                          "openai:gpt-5, anthropic:claude-sonnet-4-5, "
                                                                          "exchange (prompt files you answer); none: "
                                                                          "the template autopilot")] = None,
                             backend: Annotated[str, Field(description="triton or cuda")] = "triton",
                             sizes: Sizes = None) -> dict[str, Any]:
        """Start `kernelwright optimize` on a problem in the background and return at once with the
        run's name and status. With `llm`, LLM agents search for a faster ModelNew; without one (and
        no KERNELWRIGHT_LLM in the server's environment), the autopilot tunes the built-in Triton
        templates. Every candidate is judged in the sandbox and stored; follow the run with
        optimize_status, get the result with optimize_best. The run outlives the server and resumes
        with optimize_resume or `kernelwright optimize --resume RUN_DIR`."""
        path = self.ws.problem_file(problem)
        return self.runs.start(path, budget, llm, backend, check.sizes(sizes, self.ws.limits))

    async def optimize_resume(self, run: RunRef,
                              budget: Annotated[int | None, Field(description="raise the run's evaluation "
                                                                              "budget to this")] = None,
                              llm: Annotated[str | None, Field(description="LLM spec to continue with "
                                                                           "(search runs only)")] = None,
                              ) -> dict[str, Any]:
        """Continue a stopped, paused or finished run where it left off (the CLI's --resume): nothing it
        stored is asked or judged again; a larger budget lets it go further."""
        return self.runs.resume(self.runs.locate(run), budget, llm)

    async def optimize_status(self, run: RunRef) -> dict[str, Any]:
        """Where a run stands: whether its process runs (or its exit code and log tail), the stored
        status (running, done, paused, failed, interrupted) and detail, mode (search or autopilot),
        budget and spend, candidates by status, the best so far with its speedups, and how to resume."""
        return self.runs.status(self.runs.locate(run))

    async def optimize_best(self, run: RunRef) -> dict[str, Any]:
        """The run's best correct candidate so far: id, speedups against eager and torch.compile, its
        verdict summary, its code, and (once the run finished) the file with the evidence header."""
        return self.runs.best(self.runs.locate(run))

    async def optimize_stop(self, run: RunRef) -> dict[str, Any]:
        """Stop a running optimize run (as Ctrl-C would); everything it stored is kept and it resumes
        with optimize_resume."""
        run_dir = self.runs.locate(run)
        return await anyio.to_thread.run_sync(self.runs.stop, run_dir)


def _skill_entry(skill, full: bool) -> dict[str, Any]:
    entry = {"name": skill.name, "title": skill.title, "applies_when": skill.applies_when.to_dict(),
             "tags": list(skill.tags), "trusted": skill.trusted}
    if full:
        entry["markdown"] = skill.body
    else:
        entry["when"] = trim(skill.section("When").strip(), 600)
    return entry


READ_ONLY = ("judge", "profile", "baseline", "device_info", "skills_search", "skill", "optimize_status",
             "optimize_best")
TOOL_NAMES = ("judge", "profile", "baseline", "device_info", "skills_search", "skill", "optimize_start",
              "optimize_resume", "optimize_status", "optimize_best", "optimize_stop")
