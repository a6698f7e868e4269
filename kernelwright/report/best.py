"""The best ModelNew of a run, written with its evidence in a header comment.

The header says what a reader needs to trust (or distrust) the number: the problem and the sizes
it was measured at, speedups against eager PyTorch and torch.compile with the medians behind them,
how many correctness trials passed, the device and library versions, and which run and candidate
it came from. A CPU measurement says plainly that it is CPU wall time, not GPU performance.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelwright.rules import header_line

BASELINE_LABELS = {"eager": "eager PyTorch", "compile_default": "torch.compile",
                   "compile_max_autotune": "torch.compile (max-autotune)"}


def fmt_speedup(value: float) -> str:
    """Two decimals, or three significant digits for a tiny speedup (a CPU interpreter's 0.0005x)."""
    return f"{value:.2f}x" if abs(value) >= 0.1 else f"{value:.3g}x"


def _fmt_ms(value: Any) -> str:
    return f"{value:.4g} ms" if isinstance(value, (int, float)) else "n/a"


def _median(stats: Any) -> Any:
    return stats.get("median_ms") if isinstance(stats, dict) else None


def evidence_lines(run: dict[str, Any], candidate: dict[str, Any], verdict: dict[str, Any] | None) -> list[str]:
    """The header's lines (without the comment marker)."""
    node = candidate.get("node") or {}
    lines = [f"kernelwright: best candidate of run {run['id']}",
             f"problem:   {run['problem_path']} (sha256 {run['problem_hash'][:12]})"]
    if verdict is None:
        return lines + [f"candidate: {candidate['id']} ({node.get('action', '?')}), NOT VERIFIED: no verdict stored"]
    overrides = verdict.get("overrides") or {}
    if overrides:
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
        lines.append(f"sizes:     {sizes}" + (" (shrunk to fit a CPU)" if verdict.get("shrunk") else ""))
    lines.append(f"candidate: {candidate['id']} ({node.get('action', '?')} of {node.get('parent_id')}), "
                 f"approach: {node.get('approach_key') or 'n/a'}")
    trials = verdict.get("trials") or []
    passed = sum(1 for t in trials if t.get("ok"))
    lines.append(f"verified:  {verdict.get('status')}, {passed}/{len(trials)} correctness trials passed"
                 + _tolerance(verdict))
    lines.append(f"rules:     {_rules(verdict)}")
    margin = (verdict.get("precision") or {}).get("margin") or {}
    if margin.get("worst") is not None:
        parts = [f"{margin[k]:.3g} of the {label}" for k, label in
                 (("elementwise", "elementwise tolerance"), ("rel_l2", "rel-L2 bound")) if margin.get(k) is not None]
        lines.append(f"error:     {', '.join(parts)} (measured / allowed, worst trial)")
    lines += _speed_lines(verdict)
    lines.append(f"device:    {_device(verdict)}")
    env = verdict.get("environment") or {}
    if env.get("judged_on"):
        lines.append(f"judged on: {judged_on_text(env['judged_on'])}")
    versions = ", ".join(f"{name} {env[name]}" for name in ("torch", "triton", "cuda_runtime", "nvcc")
                         if env.get(name))
    if versions:
        lines.append(f"software:  {versions}")
    timing = verdict.get("timing") or {}
    if timing.get("method") == "wall_cpu" or str(verdict.get("device", "")).startswith("cpu"):
        lines.append("NOTE:      CPU wall-time, not GPU performance.")
    lines.append(f"written:   {datetime.now(timezone.utc).isoformat(timespec='seconds')}")
    return lines


def _rules(verdict: dict[str, Any]) -> str:
    name = verdict.get("rules") or (verdict.get("config") or {}).get("rules")
    if not name:
        policy = (verdict.get("config") or {}).get("torch_op_policy", "reject")
        return f"{'strict' if policy == 'reject' else 'kernelbench'} (judged before rule sets: torch_op_policy {policy})"
    return header_line(name)


def _tolerance(verdict: dict[str, Any]) -> str:
    precision = verdict.get("precision") or {}
    dtype, tol = precision.get("dtype"), precision.get("atol", precision.get("tolerance"))
    if dtype and tol is not None:
        return f" ({dtype}, atol=rtol={tol})"
    return f" ({dtype})" if dtype else ""


def _speed_lines(verdict: dict[str, Any]) -> list[str]:
    timing = verdict.get("timing") or {}
    baselines = verdict.get("baselines") or {}
    speedup = verdict.get("speedup") or {}
    if not timing:
        return ["speedup:   not timed"]
    lines = [f"timing:    median {_fmt_ms(timing.get('median_ms'))} over {timing.get('n')} runs "
             f"({timing.get('method')}{', L2 flushed' if timing.get('l2_flushed') else ''})"]
    for name, label in BASELINE_LABELS.items():
        if name == "eager":  # the reference as written: eager PyTorch, or its own kernels
            label = baselines.get("eager_label") or label
        if name in speedup:
            lines.append(f"speedup:   {fmt_speedup(speedup[name])} vs {label} "
                         f"({_fmt_ms(timing.get('median_ms'))} vs {_fmt_ms(_median(baselines.get(name)))})")
            lines += _baseline_source(name, baselines)
        elif name != "compile_max_autotune":
            why = (baselines.get("errors") or {}).get(name, "not measured")
            lines.append(f"speedup:   vs {label}: n/a ({why})")
    return lines


def _baseline_source(name: str, baselines: dict[str, Any]) -> list[str]:
    """Which baseline measurement a speedup used: its spread, when, the repeats, the cache file."""
    stats = baselines.get(name) or {}
    info = (baselines.get("measured") or {}).get(name)
    if not info:
        return []
    state = "steady" if info.get("steady", True) else "NOISY (repeats never agreed; re-measure)"
    return [f"baseline:  {name} median {_fmt_ms(stats.get('median_ms'))}, IQR {_fmt_ms(stats.get('iqr_ms'))}, "
            f"n={stats.get('n')}, {len(info.get('repeats') or [])} repeats, {state}; measured "
            f"{info.get('measured_at')}, cache {info.get('cache_file')} (key {str(info.get('key_sha256'))[:12]})"]


def _device(verdict: dict[str, Any]) -> str:
    env = verdict.get("environment") or {}
    if env.get("gpu"):
        extra = f", sm {env['capability']}" if env.get("capability") else ""
        return f"{env['gpu']}{extra} ({verdict.get('device')})"
    if env.get("cpu"):
        return f"CPU {env['cpu']} ({env.get('cpu_threads')} threads)"
    return str(verdict.get("device", "unknown"))


def judged_on_text(where: dict[str, Any]) -> str:
    """Host, GPU and Ray node of a verdict judged on a cluster (kernelwright.judge.scheduling.node)."""
    gpus = ", ".join(f"GPU {g.get('index')} {g.get('uuid', '')}".strip() for g in where.get("gpus") or []) or "CPU"
    node = f", Ray node {where['ray_node_id'][:12]}" if where.get("ray_node_id") else ""
    return f"{where.get('hostname', '?')}, {gpus}{node}"


def header(lines: list[str]) -> str:
    return "".join(f"# {line}\n" for line in lines) + "\n"


def write_best(store, run_id: str, path: str | Path, candidate_id: str | None = None) -> Path | None:
    """Write the run's best candidate (or `candidate_id`) with its evidence header; None when the
    run has no correct candidate."""
    run = store.run(run_id)
    candidate_id = candidate_id or run.get("best_candidate")
    if not candidate_id:
        return None
    candidate = store.candidate(run_id, candidate_id)
    if candidate is None or not candidate.get("code"):
        return None
    return write_best_file(path, run, candidate, store.verdict(run_id, candidate_id))


def write_best_file(path: str | Path, run: dict[str, Any], candidate: dict[str, Any],
                    verdict: dict[str, Any] | None) -> Path:
    """`candidate` (a store row: id, code, node) with its evidence header, written whole, then renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # written whole, then renamed: a kill never leaves half a file
    tmp.write_text(header(evidence_lines(run, candidate, verdict)) + candidate["code"])
    tmp.replace(path)
    return path
