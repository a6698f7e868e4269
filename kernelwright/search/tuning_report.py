"""How a tuning job ends: which instance is adopted, what later prompts say about it, what the job
cost, and its line in the trajectory (search/tuning.py runs the job)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernelwright.memory.trajectory import TrajectoryEntry

from .tree import PASSED, Node

if TYPE_CHECKING:
    from .jobs import JobHost, TuneJob


def params_text(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def space_text(domains: dict[str, Any]) -> str:
    return "; ".join(f"{k} in {{{', '.join(map(str, values))}}}" for k, values in domains.items())


def choose(host: "JobHost", job: "TuneJob") -> Node | None:
    """The fastest passing instance other than the default, when it beats both the candidate and
    the default instance (measured beside it): a configuration the tuner found, not noise."""
    objective, tree = host.settings.objective, host.tree
    found = [tree[i] for i in job.instances if i != job.default_id and tree[i].status == PASSED]
    if not found:
        return None
    best = max(found, key=lambda n: (n.speedup(objective) or 0.0, -n.order))
    others = [tree[job.node_id]] + ([tree[job.default_id]] if job.default_id else [])
    bar = max((n.speedup(objective) or 0.0) for n in others if n.status == PASSED)
    return best if (best.speedup(objective) or 0.0) > bar else None


def job_cost(host: "JobHost", job: "TuneJob") -> dict[str, Any]:
    """Evaluations, Templatizer calls and the seconds the instances' verdicts report."""
    judged = [host.tree[i].eval for i in job.instances if host.tree[i].eval is not None]
    on_gpu = any(str(e.device).startswith("cuda") for e in judged)
    prune = job.state.prune if job.state is not None else None
    device_s, judge_s = sum(e.device_s for e in judged) + job.sweep_cost[0], sum(e.judge_s for e in judged) + job.sweep_cost[1]
    return {"evaluations": job.evals, "templatizer_calls": job.calls,
            "device_s": round(device_s, 3), "judge_s": round(judge_s, 3),
            "device_label": "GPU-seconds" if on_gpu else "CPU-seconds",
            "pruned_before": len(prune.pruned) if prune else 0, "pruned_after": len(prune.after_compile) if prune else 0}


def conclude(host: "JobHost", job: "TuneJob", outcome: str | None) -> Node | None:
    """Record the job's end on the candidate (and the adopted instance); the adopted node or None."""
    tree, objective = host.tree, host.settings.objective
    original = tree[job.node_id]
    adopted = choose(host, job) if job.state is not None and outcome is None else None
    judged = len(job.state.trials) if job.state is not None else 0
    if adopted is not None:
        adopted.search_parent = original.id
        adopted.tuned = adopted_text(job, adopted, original, objective)
        original.tuned = original_text(job, adopted, original, objective)
    elif job.state is not None and judged > 1:
        original.tuned = original_text(job, None, original, objective)
    summary = _summary(job, adopted, outcome)
    original.tuning = _record(host, job, adopted, summary)
    speed = adopted.speedup(objective) if adopted else None
    host.trajectory.add(TrajectoryEntry(
        candidate_id=adopted.id if adopted else job.id, parent_id=original.id, action="tune",
        plan=f"templatize {original.id} and tune its parameters", approach_key=f"parameter tuning of {original.id}",
        outcome=outcome or ("faster" if adopted else "slower"), speedup=speed if speed and speed > 0 else None,
        reason=summary[:400]))
    host.changed(original.id, *job.instances)
    return adopted


def _summary(job: "TuneJob", adopted: Node | None, outcome: str | None) -> str:
    judged = len(job.state.trials) if job.state is not None else 0
    if outcome is not None or job.state is None:
        return "not tuned: " + "; then ".join(job.notes or ["no usable template"])
    how = f"{judged} configuration(s) judged"
    if job.sweep_log:
        swept = sum(s["configs"] for s in job.sweep_log)
        how = (f"{judged} configuration(s) measured ({swept} in {len(job.sweep_log)} sweep(s), the fastest of each "
               "judged in full)")
    if adopted is not None:
        text = f"tuned: {how}, {adopted.id} ({params_text(adopted.tuning['params'])}) adopted"
    else:
        text = f"tuned: {how}, none faster than the candidate's own"
    return text + (f" ({'; '.join(job.notes)})" if job.notes else "")


def _record(host: "JobHost", job: "TuneJob", adopted: Node | None, summary: str) -> dict[str, Any]:
    record: dict[str, Any] = {"job": job.id, "outcome": summary, "instances": list(job.instances),
                              "best": adopted.id if adopted else None, "notes": list(job.notes),
                              "cost": job_cost(host, job)}
    if job.sweep_log:
        record["sweeps"] = [dict(s) for s in job.sweep_log]
    if job.seeds is not None:
        record["seeds"] = [dict(c) for c in job.seeds]
    if job.template is not None:
        record.update(template=job.template.hash, space={k: list(v) for k, v in job.template.params.items()},
                      defaults=dict(job.template.defaults))
    if job.state is not None:
        record.update(strategy=job.state.strategy, budget=job.state.budget, feasible=len(job.state.prune.feasible),
                      default_instance=job.default_id,
                      best_params=dict(adopted.tuning["params"]) if adopted else None)
    return record


def original_text(job: "TuneJob", adopted: Node | None, original: Node, objective: str) -> str:
    state, template = job.state, job.template
    judged = f"{len(state.trials)} of {len(state.prune.feasible)} feasible configurations judged"
    head = f"parameters tuned: {space_text(template.params)} ({judged}; this candidate's values: " \
           f"{params_text(template.defaults)})."
    if adopted is None:
        return head + " None was faster than this candidate's own values."
    speed = adopted.speedup(objective)
    return head + f" The fastest, {params_text(adopted.tuning['params'])}, is {adopted.id}" + \
        (f" at {speed:.3g}x." if speed else ".")


def adopted_text(job: "TuneJob", adopted: Node, original: Node, objective: str) -> str:
    state, template = job.state, job.template
    return (f"parameters tuned: this is the fastest of {len(state.trials)} judged configurations of "
            f"{original.id}'s parameters ({space_text(template.params)}): {params_text(adopted.tuning['params'])}.")
