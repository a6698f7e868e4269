#!/usr/bin/env bash
# GPU evidence for the real-world suite (examples/realworld, docs/reference_kernels.md), one device call:
#
#   bash bench/run_realworld_gpu.sh          # both parts, in this order
#   bash bench/run_realworld_gpu.sh pytest   # only one part: suite | pytest
#
#   suite   210 s  bench/realworld_gpu.py: reference-kernel baselines, each reference judged as its own
#                  candidate, the no-LLM autopilot on its templatized launch configuration (4 instances each)
#   pytest  150 s  every reference against its plain-PyTorch formula on the GPU (the CUDA one included), and
#                  the judge on kernel references end to end: backward, in place, the CUDA build as the baseline
#                  (tests/examples/test_realworld.py, tests/judge/test_reference_kernels.py)
# Worst case 360 s plus 5 s of kill grace per part. Results under $OUT: realworld_run.log,
# realworld_gpu.json, realworld_gpu.md (the table for docs/benchmarks.md), realworld_pytest.txt.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OUT="${OUT:-/tmp/kernelwright_bench_out}"
mkdir -p "$OUT"
LOG="$OUT/realworld_run.log"
PARTS="${*:-suite pytest}"

part() {  # part NAME LIMIT_S COMMAND...
    local name=$1 limit=$2 started
    shift 2
    started=$(date +%s)
    echo "=== $name (limit ${limit} s) ===" | tee -a "$LOG"
    timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
    local code=$?
    echo "=== $name: exit $code after $(( $(date +%s) - started )) s ===" | tee -a "$LOG"
}

for name in $PARTS; do
    case "$name" in
        pytest) part pytest 150 bash -c "python -m pytest -q -p no:cacheprovider tests/examples/test_realworld.py \
                    tests/judge/test_reference_kernels.py 2>&1 | tee $OUT/realworld_pytest.txt | tail -n 25" ;;
        suite) part suite 210 python bench/realworld_gpu.py --max-evals 4 --workers 4 --budget-s 150 ;;
        *) echo "unknown part $name (suite | pytest)"; exit 2 ;;
    esac
done
tail -n 20 "$OUT/realworld_gpu.md" 2>/dev/null
