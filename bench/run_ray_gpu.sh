#!/usr/bin/env bash
# Ray on a GPU machine without a package registry, in one device call of at most 4 minutes:
#
#   bash bench/run_ray_gpu.sh           # with .ray-carry/ (bench/make_ray_carry.py --python 3.12) in the checkout
#
# 1. installs the stripped Ray and its missing dependencies from .ray-carry/ into /tmp/site;
# 2. judges the shared-problem suite of bench/candidates through Ray (a local instance, one judge actor
#    per GPU, CUDA builds in one-CPU Ray tasks), then through the local pool if --budget-s allows
#    (bench/ray_throughput.py); each mode with a cold cache of its own.
# Results under $OUT: ray_throughput.json, ray_throughput.log.
# KernelBench problems: shared/kernelbench in the repository (git-ignored) or $KW_KERNELBENCH.
set -u
cd "$(dirname "$0")/.."
SITE="${KW_RAY_SITE:-/tmp/site}"
mkdir -p "$SITE"
python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .ray-carry/*.whl || exit 1
tar -xJf .ray-carry/ray-*-local.tar.xz -C "$SITE" || exit 1
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OUT="${OUT:-/tmp/kernelwright_bench_out}"
mkdir -p "$OUT"
if [ -z "${KW_KERNELBENCH:-}" ] && [ -d shared/kernelbench/level1 ]; then
    export KW_KERNELBENCH="$PWD/shared/kernelbench"
fi
python3 -c "import ray, sys; print('ray', ray.__version__, 'from', ray.__file__, '- python', sys.version.split()[0])" \
    2>&1 | tee "$OUT/ray_throughput.log"
PYTHONUNBUFFERED=1 timeout -k 5 225 python3 bench/ray_throughput.py --modes ray,local --per-gpu 4 --budget-s 130 \
    2>&1 | tee -a "$OUT/ray_throughput.log"
