#!/usr/bin/env bash
# The no-LLM autopilot over every shared KernelBench level-1 and level-2 problem as ONE suite with
# ONE batch folder, judged on a GPU machine in one call, and its report.
#
#   bash bench/suite_gpu.sh prepare [SUITE_DIR [MAX_EVALS]]     # search machine (CPU): the requests
#   OUT=out bash bench/batch_gpu.sh SUITE_DIR-round1.tar 0 500   # GPU machine: judge what fits in 500 s
#   bash bench/suite_gpu.sh finish VERDICTS.tar [SUITE_DIR [REPORT_DIR]]   # search machine: store, report
#
# prepare: `kernelwright optimize level1 level2 --eval batch --target h100` without an LLM: the
#   template tuner matches each problem (62 of the 100 have no template: failed, counted as 1.0x),
#   and writes its first round of instances (the template's default instance, then up to
#   MAX_EVALS - 1 more, default 3 in all) as requests into SUITE_DIR/evals, each with a per-request
#   time limit (judge.timeout_s=180) and a priority: every problem's default instance is judged
#   before anyone's second. Then it packs SUITE_DIR/evals into SUITE_DIR-round1.tar. About a minute.
# GPU: bench/batch_gpu.sh records the device (device.json, peaks measured once: about a minute),
#   judges by priority until done or the time limit, and packs every verdict written into
#   $OUT/verdicts.tar. Verdicts are written as they complete: a time limit loses only those in flight.
# finish: unpacks the verdicts next to the requests, resumes the suite (stores every verdict that
#   came back, writes the next round's requests for templates of several kernels) and writes the
#   report (JSON, Markdown, HTML) into REPORT_DIR (default SUITE_DIR/report). The report's first
#   lines say how much of the requested work was judged ("partial: N evaluation(s) still wait").
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
KB="${KW_KERNELBENCH:-../shared/kernelbench}"
what="${1:?usage: bash bench/suite_gpu.sh prepare|finish ...}"
case "$what" in
  prepare)
    SUITE="${2:-gpu-evidence/kb-l12}"
    EVALS="${3:-3}"
    if [ -e "$SUITE/suite.json" ]; then echo "$SUITE already holds a suite" >&2; exit 2; fi
    set +e
    python -m kernelwright optimize "$KB/level1" "$KB/level2" --eval batch --target h100 --max-evals "$EVALS" \
        --set judge.timeout_s=180 --run-dir "$SUITE" --quiet --json > "$SUITE.prepare.json"
    code=$?
    set -e
    if [ "$code" != 75 ]; then echo "expected the suite to pause (75), got $code" >&2; exit 1; fi
    tar -cf "$SUITE-round1.tar" -C "$(dirname "$SUITE")" "$(basename "$SUITE")/evals"
    python - "$SUITE" <<'EOF'
import json, sys
from pathlib import Path
suite = Path(sys.argv[1])
result = json.loads(Path(f"{suite}.prepare.json").read_text())
counts = {}
for item in result["suite"]:
    counts[item["status"]] = counts.get(item["status"], 0) + 1
print(f"{suite}: {len(result['suite'])} problems {counts}; {result['pending_evals']} requests in {suite}/evals")
print(f"carry {suite}-round1.tar to the GPU machine and run: OUT=out bash bench/batch_gpu.sh {suite}-round1.tar 0 500")
EOF
    ;;
  finish)
    VERDICTS="${2:?usage: bash bench/suite_gpu.sh finish VERDICTS.tar [SUITE_DIR [REPORT_DIR]]}"
    SUITE="${3:-gpu-evidence/kb-l12}"
    REPORT="${4:-$SUITE/report}"
    tar -xf "$VERDICTS" -C "$(dirname "$SUITE")"
    set +e
    python -m kernelwright optimize --resume "$SUITE" --quiet > "$SUITE.resume.txt" 2>&1
    echo "resume: exit $? (75: more requests wait for the next GPU call)"
    set -e
    python -m kernelwright report "$SUITE" --out "$REPORT" --kernelbench "$KB/baseline_times" \
        --title "KernelBench levels 1 and 2 (the shared half), no-LLM autopilot, H100"
    head -n 12 "$REPORT/report.md"
    ;;
  *)
    echo "usage: bash bench/suite_gpu.sh prepare|finish ..." >&2
    exit 2
    ;;
esac
