#!/usr/bin/env bash
# GPU evidence for the judge in one device call of at most 9.5 minutes:
#
#   bash bench/run_gpu_evidence.sh all        # every part below, in this order
#   bash bench/run_gpu_evidence.sh PART ...   # only some: peaks leftovers adversarial pytest examples throughput
#
# Each part runs under its own time limit (seconds, below), so one slow part cannot starve the rest;
# a part that hits its limit is killed (its judge workers die with it) and the next one starts.
#   peaks        30  device peaks (copy bandwidth, matmul rates) for the speed-of-light floors
#   leftovers   140  47_Sum, 5_Matrix_scalar, 63_Gemm, 9_Matmul: CUDA and Triton, eager + compile baselines
#   adversarial  65  bench/candidates/adversarial: every one must be rejected
#   pytest       70  python -m pytest -q -m gpu tests/judge
#   examples     65  examples/judge_examples.py --hacks
#   throughput  170  Triton (16) and CUDA cold/cached (8) candidates per GPU-minute with 8 evaluations
#                    per GPU, repeat spread, ncu agreement (bench/judge_throughput.py)
# Worst case 540 s plus at most 5 s of kill grace per part.
# Results under $OUT (at most 7 files): run_all.log (everything printed), evidence_leftovers.{json,txt},
# evidence_adversarial.{json,txt}, judge_throughput.json, examples_summary.txt.
# KernelBench problems: shared/kernelbench in the repository (git-ignored) or $KW_KERNELBENCH.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OUT="${OUT:-/tmp/kernelwright_bench_out}"
if [ -z "${KW_KERNELBENCH:-}" ] && [ -d shared/kernelbench/level1 ]; then
    export KW_KERNELBENCH="$PWD/shared/kernelbench"  # the copy the lead places in the checkout
fi
mkdir -p "$OUT"
LOG="$OUT/run_all.log"
SCRATCH="$(mktemp -d)"

part() {  # part NAME LIMIT_S COMMAND...: run COMMAND under LIMIT_S, everything into the log, a tail to stdout
    local name=$1 limit=$2 started
    shift 2
    started=$(date +%s)
    echo "=== $name (limit ${limit} s) ===" | tee -a "$LOG"
    timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
    local code=$?
    sed -n "/^=== $name (limit/,\$p" "$LOG" | tail -n 14 | grep -v "^=== $name (limit"
    echo "=== $name: exit $code after $(( $(date +%s) - started )) s ===" | tee -a "$LOG"
}

run_part() {
    case "$1" in
        peaks)
            part peaks 30 python -c "import json, os; from kernelwright.judge.peaks import ensure_peaks; \
print('TORCH_CUDA_ARCH_LIST in the environment:', os.environ.get('TORCH_CUDA_ARCH_LIST', 'unset')); \
print(json.dumps(ensure_peaks('cuda', force=True).to_dict()))" ;;
        leftovers)
            part leftovers 140 python bench/judge_gpu_evidence.py --set correct \
                --only 47_Sum,5_Matrix_scalar,63_Gemm,9_Matmul --budget-s 130 --name evidence_leftovers ;;
        adversarial)
            part adversarial 65 python bench/judge_gpu_evidence.py --set adversarial --baselines eager \
                --budget-s 58 --name evidence_adversarial ;;
        pytest)
            part pytest 70 python -m pytest -q -m gpu tests/judge --continue-on-collection-errors \
                -p no:cacheprovider ;;
        examples)
            part examples 65 python examples/judge_examples.py --hacks --out "$SCRATCH/examples"
            cp "$SCRATCH/examples/summary.txt" "$OUT/examples_summary.txt" 2>/dev/null ;;
        throughput)
            part throughput 170 python bench/judge_throughput.py --n 8 --n-triton 16 --per-gpu 8 \
                --budget-s 160 --sections triton,repeat_spread,ncu_agreement,cuda_cold,cuda_cached ;;
        *)
            echo "unknown part '$1' (peaks leftovers adversarial pytest examples throughput all)" >&2 ;;
    esac
}

if [ "${1:-all}" = "all" ]; then
    set -- peaks leftovers adversarial pytest examples throughput
fi
for name in "$@"; do
    run_part "$name"
done
rm -rf "$SCRATCH"
