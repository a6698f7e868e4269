#!/usr/bin/env bash
# Issue 14 timing evidence in one device call (about 2-2.5 minutes): the reference of four real-world
# problems timed as candidate and as eager baseline (bench/candidate_vs_baseline.py), then CUDA-event
# timing variants against ncu's gpu__time_duration on six kernels (bench/timing_agreement.py).
# Results: $OUT/candidate_vs_baseline.json, $OUT/timing_agreement.json (its "summary" per variant).
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export OUT=${OUT:-bench/results}
mkdir -p "$OUT"
timeout 90 python bench/candidate_vs_baseline.py --budget-s 60 2>&1 | tail -n 8
timeout 75 python bench/timing_agreement.py --budget-s 65 --reps 100 --controls none 2>&1 | tail -n 12
