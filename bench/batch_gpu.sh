#!/usr/bin/env bash
# Judge the batch folders of one or more `--eval batch` runs on a GPU machine in one call, and hand
# the verdicts back as one file.
#
#   bash bench/batch_gpu.sh IN.tar [PROFILE_BUDGET_S [LIMIT_S]]
#
# IN.tar holds the runs' evals folders with their paths as on the search machine, e.g. made there by
#     tar -cf gpu-evidence/round1.tar gpu-evidence/*/evals
# The script unpacks it into a scratch folder, runs `python -m kernelwright.judge.scheduling.batch` on every
# evals folder at once (recording the device in each folder's device.json on first contact, the
# peaks measured once, then judging every pending request and profiling the passing candidates
# whose requests ask for it as their verdicts come in, within PROFILE_BUDGET_S seconds, default 150), all under
# LIMIT_S seconds (default 520), $KW_PER_GPU evaluations at once per GPU (default 4), with
# $KW_BASELINE_LANES problems' baselines measured ahead at once (default 2; 0: off, each problem's
# first candidate measures them); with KW_RETRY_ERRORS=1, requests whose verdict was a system error
# are judged again. It writes, under $OUT:
#     verdicts.tar     every *.verdict.json and device.json, same paths: `tar -xf verdicts.tar` at
#                      the search machine's folder where IN.tar was made puts them in place
#     batch_gpu.log    what the runner printed
# Then resume each run there: kernelwright optimize --resume gpu-evidence/NAME
set -u
IN=$(realpath "${1:?usage: bash bench/batch_gpu.sh IN.tar [PROFILE_BUDGET_S [LIMIT_S]]}")
BUDGET=${2:-150}
LIMIT=${3:-520}
export OUT="${OUT:-/tmp/kernelwright_batch_out}"
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
WORK="$(mktemp -d)"
tar -xf "$IN" -C "$WORK" || { echo "cannot unpack $IN" >&2; exit 2; }
mapfile -t FOLDERS < <(cd "$WORK" && find . -type d -name evals | sort)
if [ "${#FOLDERS[@]}" -eq 0 ]; then
    echo "no evals folder in $IN" >&2
    exit 2
fi
echo "judging ${#FOLDERS[@]} folders: ${FOLDERS[*]} (profile budget ${BUDGET} s, limit ${LIMIT} s, baseline lanes ${KW_BASELINE_LANES:-2})" | tee "$OUT/batch_gpu.log"
started=$(date +%s)
(cd "$WORK" && timeout -k 10 "$LIMIT" python -m kernelwright.judge.scheduling.batch "${FOLDERS[@]}" \
    --profile-budget "$BUDGET" --per-gpu "${KW_PER_GPU:-4}" --baseline-lanes "${KW_BASELINE_LANES:-2}" \
    ${KW_RETRY_ERRORS:+--retry-errors}) >>"$OUT/batch_gpu.log" 2>&1
code=$?
echo "batch runner: exit $code after $(( $(date +%s) - started )) s" | tee -a "$OUT/batch_gpu.log"
(cd "$WORK" && find . \( -name '*.verdict.json' -o -name device.json \) -print0 \
    | tar -cf "$OUT/verdicts.tar" --null -T -)
echo "$(tar -tf "$OUT/verdicts.tar" | grep -c verdict.json) verdicts in $OUT/verdicts.tar" | tee -a "$OUT/batch_gpu.log"
tail -n 40 "$OUT/batch_gpu.log"
exit "$code"
