#!/usr/bin/env bash
# The no-LLM autopilot over shared KernelBench level-1 and level-2 problems as ONE suite with ONE
# batch folder, judged on a GPU machine in one call, and its report. All 100 problems, or a bounded
# subset (--problems N) for a short GPU call.
#
#   bash bench/suite_gpu.sh prepare [--problems N] [--max-evals E] [SUITE_DIR]   # CPU: the requests
#   bash bench/suite_gpu.sh gpu [--limit-s S] [--profile-s P] [--retry-errors] TAR # GPU: judge within S s
#   bash bench/suite_gpu.sh finish VERDICTS.tar [SUITE_DIR [REPORT_DIR]]          # CPU: store, report
#
# prepare: `kernelwright optimize PROBLEMS --eval batch --target h100` without an LLM. PROBLEMS is
#   level1 and level2 (all 100), or with --problems N a list file of N problems picked by
#   bench/suite_pick.py (covered by the template library, round-robin over template families,
#   single-kernel families first). The template tuner matches each problem (an unmatched one is
#   failed, counted as 1.0x) and writes its first round of instances (the template's default
#   instance, then up to E - 1 more, default E = 3) as requests into SUITE_DIR/evals, each with a
#   per-request time limit (judge.timeout_s=180) and a priority: every problem's default instance
#   is judged before anyone's second. Then it packs SUITE_DIR/evals into SUITE_DIR-round1.tar and
#   prints the request count and what judging all of them would take (an estimate, see below).
# gpu: bench/batch_gpu.sh with a wall-clock limit S (default 150 s, all included) and a profiling
#   budget P (default 0: no ncu). Records the device (device.json), judges by priority until done
#   or the limit, and packs every verdict written into $OUT/verdicts.tar. Verdicts are written as
#   they complete: the limit loses only those in flight. --retry-errors (KW_RETRY_ERRORS=1 for
#   bench/batch_gpu.sh) also judges again, once, the requests whose verdict is a system error (out
#   of GPU memory on a shared GPU, a baseline out of memory, an internal judge error): TAR must
#   then hold those verdicts too (a tar of SUITE_DIR/evals as it stands after `finish`, e.g.
#   `tar -cf SUITE_DIR-retry.tar -C "$(dirname SUITE_DIR)" "$(basename SUITE_DIR)/evals"`), and
#   `finish` puts the new verdicts in place; the suite's resume takes them (docs/report.md).
# finish: unpacks the verdicts next to the requests, resumes the suite (stores every verdict that
#   came back, writes the next round's requests) and writes the report (JSON, Markdown, HTML) into
#   REPORT_DIR (default SUITE_DIR/report). Its first lines say how much of the requested work was
#   judged ("partial: N evaluation(s) still wait").
#
# The estimate (not a measurement): on the H100 runs of docs/benchmarks.md, a problem's first
# verdict at KernelBench sizes took 35-80 s of judge wall time (its eager and torch.compile
# baselines are most of it), a further instance 10-50 s; judges overlap their CPU work but time
# one at a time on the GPU. `prepare` prints the serial bound from those numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
KB="${KW_KERNELBENCH:-../shared/kernelbench}"
usage="usage: bash bench/suite_gpu.sh prepare [--problems N] [--max-evals E] [SUITE_DIR] | gpu [--limit-s S] [--profile-s P] [--retry-errors] TAR | finish VERDICTS.tar [SUITE_DIR [REPORT_DIR]]"
what="${1:-}"
shift || true
case "$what" in
  prepare)
    PROBLEMS="" EVALS=3
    while [ $# -gt 0 ]; do
      case "$1" in
        --problems) PROBLEMS="${2:?$usage}"; shift 2 ;;
        --max-evals) EVALS="${2:?$usage}"; shift 2 ;;
        -*) echo "$usage" >&2; exit 2 ;;
        *) break ;;
      esac
    done
    SUITE="${1:-gpu-evidence/kb-l12}"
    if [ -e "$SUITE/suite.json" ]; then echo "$SUITE already holds a suite" >&2; exit 2; fi
    mkdir -p "$(dirname "$SUITE")"
    if [ -n "$PROBLEMS" ]; then
      python bench/suite_pick.py "$SUITE.list" --problems "$PROBLEMS" --kernelbench "$KB"
      TARGETS=("$SUITE.list")
    else
      TARGETS=("$KB/level1" "$KB/level2")
    fi
    set +e
    python -m kernelwright optimize "${TARGETS[@]}" --eval batch --target h100 --max-evals "$EVALS" \
        --set judge.timeout_s=180 --run-dir "$SUITE" --quiet --json > "$SUITE.prepare.json"
    code=$?
    set -e
    if [ "$code" != 75 ]; then echo "expected the suite to pause (75), got $code" >&2; exit 1; fi
    tar -cf "$SUITE-round1.tar" -C "$(dirname "$SUITE")" "$(basename "$SUITE")/evals"
    python - "$SUITE" <<'EOF'
import json, sys
from pathlib import Path
from kernelwright.judge.scheduling.batch import request_priority
suite = Path(sys.argv[1])
result = json.loads(Path(f"{suite}.prepare.json").read_text())
counts = {}
for item in result["suite"]:
    counts[item["status"]] = counts.get(item["status"], 0) + 1
requests = sorted((suite / "evals").glob("*.request.json"))
first = sum(request_priority(r) == 0 for r in requests)
print(f"{suite}: {len(result['suite'])} problems {counts}; {len(requests)} requests in {suite}/evals "
      f"({first} problems' first instances, {len(requests) - first} further instances)")
# the estimate of the header (H100 judge wall times of docs/benchmarks.md), serial: an upper bound
low, high = first * 35 + (len(requests) - first) * 10, first * 80 + (len(requests) - first) * 50
print(f"estimate, judged one at a time: {low / 60:.0f}-{high / 60:.0f} GPU-minutes for this round "
      f"(overlapping judges take less; not a measurement)")
print(f"GPU: OUT=out bash bench/suite_gpu.sh gpu --limit-s 150 {suite}-round1.tar")
EOF
    ;;
  gpu)
    LIMIT=150 PROFILE=0
    while [ $# -gt 0 ]; do
      case "$1" in
        --limit-s) LIMIT="${2:?$usage}"; shift 2 ;;
        --profile-s) PROFILE="${2:?$usage}"; shift 2 ;;
        --retry-errors) export KW_RETRY_ERRORS=1; shift ;;
        -*) echo "$usage" >&2; exit 2 ;;
        *) break ;;
      esac
    done
    exec bash bench/batch_gpu.sh "${1:?$usage}" "$PROFILE" "$LIMIT"
    ;;
  finish)
    VERDICTS="${1:?$usage}"
    SUITE="${2:-gpu-evidence/kb-l12}"
    REPORT="${3:-$SUITE/report}"
    tar -xf "$VERDICTS" -C "$(dirname "$SUITE")"
    set +e
    python -m kernelwright optimize --resume "$SUITE" --quiet > "$SUITE.resume.txt" 2>&1
    echo "resume: exit $? (75: more requests wait for the next GPU call)"
    set -e
    TITLE="KernelBench levels 1 and 2 (the shared half), no-LLM autopilot, H100"
    if [ -f "$SUITE.list" ]; then  # a subset: its list file's first line says which
      TITLE="KernelBench levels 1 and 2, a subset: $(head -n 1 "$SUITE.list" | sed 's/^# //'); no-LLM autopilot, H100"
    fi
    python -m kernelwright report "$SUITE" --out "$REPORT" --kernelbench "$KB/baseline_times" --title "$TITLE"
    head -n 12 "$REPORT/report.md"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
