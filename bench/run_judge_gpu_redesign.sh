#!/usr/bin/env bash
# GPU evidence of the runner/checker judge (issue 30), in parts that fit one device call each.
#
#   bash bench/run_judge_gpu_redesign.sh prepare        # HERE, before the device call: the old judge
#                                                       # (main at ef9bfcd) into .kw/old for the overhead part
#   bash bench/run_judge_gpu_redesign.sh PART ...       # ON THE DEVICE (carry .kw/old for `overhead`,
#                                                       # .whl from bench/device_wheels.sh for `runners`)
#
# Parts and their budget (seconds):
#   smoke      120  four candidates through the real sandbox, stacks printed if a stage hangs
#   pytest     150  the judge's GPU tests of the new design (link, red team GPU entries, gpu_judge)
#   redteam    300  red_team + legit + adversarial + correct under kernelbench, library, strict
#   overhead   240  the same correct Triton candidates, one at a time, by the old judge and the new
#   adversarial 300 the earlier adversarial set and the legit kernels under kernelbench, library, strict
#   runners    200  three batch runners sharing the GPU (no legitimate candidate rejected), peaks measured
#                   beside them (within 0.5-1.2x the datasheet, or named)
#   verify     330  what the third H200 session fixed without a GPU left: the admission test of a
#                   candidate that fills the GPU inside forward (the checker's room: `trim`), the
#                   fault-locating rerun (CUDA_LAUNCH_BLOCKING in the runner only), a small round's
#                   profiles (the build-cache shim; why Triton profiles were `partial`)
# Results under $OUT: smoke.log, pytest.log, evidence_redesign.{json,txt}, overhead_{old,new}.json,
# four_runners.{json,md}, peaks.json.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
# the command line (`python -m kernelwright`, which the runners part starts) needs pydantic & co.,
# which the GPU image lacks: carry .whl (bench/device_wheels.sh) and they are installed here
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -d /tmp/site/pydantic ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
[ -d /tmp/site ] && export PYTHONPATH="$PYTHONPATH:/tmp/site"

part() {
    local name=$1 limit=$2
    shift 2
    echo "=== $name (limit ${limit}s): $*"
    local started=$SECONDS
    timeout "$limit" "$@" 2>&1 | grep -v "^USDT:" | tee "$OUT/$name.log" | tail -40
    echo "=== $name took $((SECONDS - started)) s"
}

[ $# -gt 0 ] || set -- smoke pytest redteam
for what in "$@"; do
    case "$what" in
        prepare)
            rm -rf .kw/old && mkdir -p .kw/old && git archive ef9bfcd kernelwright bench | tar -x -C .kw/old
            echo "the judge of ef9bfcd and its bench scripts are in .kw/old (carry it)" ;;
        smoke)
            KW_DEBUG_STACKS=20 part smoke 120 python bench/probes/judge_smoke.py red_team/lazy_thread.py \
                legit/cuda_graph_replay.py red_team/recorder_probe_torch.py ;;
        pytest)
            part pytest 150 python -m pytest -q -x -m gpu tests/judge/checker/test_link.py tests/judge/test_red_team.py \
                tests/judge/test_gpu_judge.py ;;
        redteam)
            part redteam 300 python bench/judge_gpu_evidence.py --set red_team,legit,adversarial,correct \
                --baselines "" --rules kernelbench,library,strict --per-gpu 8 --budget-s 280 --name evidence_redesign ;;
        adversarial)  # the earlier adversarial set under every rule set (redteam's budget ends before strict)
            part adversarial 300 python bench/judge_gpu_evidence.py --set adversarial,legit --baselines "" \
                --rules kernelbench,library,strict --per-gpu 8 --budget-s 280 --name evidence_adversarial ;;
        overhead)
            # the old judge with its own bench script (today's imports judge/scheduling, which it lacks)
            (cd .kw/old && PYTHONPATH="$PWD" part overhead_old 120 python bench/judge_gpu_evidence.py --set correct \
                --only triton --baselines "" --per-gpu 1 --budget-s 110 --name overhead_old)
            part overhead_new 120 python bench/judge_gpu_evidence.py --set correct --only triton --baselines "" \
                --per-gpu 1 --budget-s 110 --name overhead_new ;;
        runners)
            (python -m kernelwright device-peaks --force --json > "$OUT/peaks.json" 2>&1 &)
            part four_runners 200 python bench/four_runners.py --runners 3 --limit-s 180 ;;
        verify)
            part verify_pytest 180 python -m pytest -q -m gpu -p no:cacheprovider --tb=short \
                "tests/judge/scheduling/test_admission.py::test_on_a_gpu_a_candidate_that_fits_only_without_the_kept_references_passes_judged_with_them_on_the_host" \
                tests/judge/test_locate.py
            part verify_round 150 python bench/round_speed.py --problems 19_ReLU --per-problem 3 --suites 1 \
                --profile-budget 100 --limit-s 140 ;;
        *)
            echo "unknown part '$what' (prepare smoke pytest redteam adversarial overhead runners verify)" >&2 ;;
    esac
done
