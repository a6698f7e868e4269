#!/usr/bin/env bash
# GPU evidence for issue 9 (rule sets, precision by measurement) in one device call of at most ~4 minutes:
#
#   bash bench/run_rules_evidence.sh            # every part below, in this order
#   bash bench/run_rules_evidence.sh PART ...   # only some: pytest gemm adversarial
#
# Each part runs under its own time limit (seconds), so one slow part cannot starve the rest:
#   pytest      110  tests/judge/test_gpu_rules.py: cuDNN conv + Triton epilogue, all-torch + copy kernel,
#                    extensions calling at::matmul / cuBLAS, 3xTF32 vs TF32 GEMMs, under each rule set
#   gemm         80  bench/rules_gemm_epilogue.py: level-2 GEMM + epilogue (95_Matmul_Add_Swish_Tanh_GELU_Hardtanh),
#                    cuBLAS + fused Triton epilogue (kernelbench) and 3xTF32 Triton GEMM + epilogue (strict)
#                    against eager and torch.compile at full size
#   adversarial  50  bench/candidates/adversarial under kernelbench, library, strict (kernelbench first)
# Results under $OUT: rules_all.log, rules_gemm_epilogue.{json,md}, evidence_rules_adversarial.{json,txt}.
# KernelBench problems: shared/kernelbench in the repository (git-ignored) or $KW_KERNELBENCH.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OUT="${OUT:-/tmp/kernelwright_bench_out}"
if [ -z "${KW_KERNELBENCH:-}" ] && [ -d shared/kernelbench/level1 ]; then
    export KW_KERNELBENCH="$PWD/shared/kernelbench"
fi
mkdir -p "$OUT"
LOG="$OUT/rules_all.log"

part() {  # part NAME LIMIT_S COMMAND...: run COMMAND under LIMIT_S, everything into the log, a tail to stdout
    local name=$1 limit=$2 started
    shift 2
    started=$(date +%s)
    echo "=== $name (limit ${limit} s) ===" | tee -a "$LOG"
    timeout -k 5 "$limit" "$@" >>"$LOG" 2>&1
    local code=$?
    sed -n "/^=== $name (limit/,\$p" "$LOG" | tail -n 24 | grep -v "^=== $name (limit"
    echo "=== $name: exit $code after $(( $(date +%s) - started )) s ===" | tee -a "$LOG"
}

run_part() {
    case "$1" in
        pytest)
            part pytest 110 python -m pytest -q -s -m gpu tests/judge/test_gpu_rules.py -p no:cacheprovider ;;
        gemm)
            part gemm 80 python bench/rules_gemm_epilogue.py --budget-s 74 ;;
        adversarial)
            part adversarial 50 python bench/judge_gpu_evidence.py --set adversarial --baselines "" \
                --rules kernelbench,library,strict --per-gpu 8 --budget-s 45 --name evidence_rules_adversarial ;;
        *)
            echo "unknown part '$1' (pytest gemm adversarial)" >&2 ;;
    esac
}

if [ $# -eq 0 ]; then
    set -- pytest gemm adversarial
fi
for name in "$@"; do
    run_part "$name"
done
