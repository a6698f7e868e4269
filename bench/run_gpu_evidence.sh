#!/usr/bin/env bash
# GPU evidence for the judge, in two device calls of at most 10 minutes each.
#   part 1: device peaks, then every correct candidate judged (timings, baselines, floor)
#   part 2: GPU tests of timing/peaks, every adversarial candidate judged, then throughput / repeat
#           spread / ncu agreement
# Usage (repository root): bash bench/run_gpu_evidence.sh 1   (then 2). Results under $OUT.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OUT="${OUT:-/tmp/kernelwright_bench_out}"
mkdir -p "$OUT"
part="${1:-1}"
if [ "$part" = "1" ]; then
    python -m kernelwright.cli.gpu_cmd --force 2>&1 | tail -12
    python bench/judge_gpu_evidence.py --set correct --budget-s 450 2>&1 | tee "$OUT/part1.log" | tail -40
else
    timeout 120 python -m pytest -q -m gpu tests/judge/test_timing.py tests/judge/test_peaks.py 2>&1 | tail -4
    python bench/judge_gpu_evidence.py --set adversarial --budget-s 200 --baselines eager 2>&1 | tee "$OUT/part2a.log" | tail -25
    python bench/judge_throughput.py --n 8 --budget-s 260 2>&1 | tee "$OUT/part2b.log" | tail -20
fi
