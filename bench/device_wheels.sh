#!/usr/bin/env bash
# The wheels the GPU image lacks for kernelwright's command line and tuner (pydantic, optuna, the
# LLM clients and their needs; KINDS.md lists what the image has), into .whl (git-ignored), for
# cp312 manylinux x86-64. Run HERE (pip reaches the registry); carry .whl in the device call and
# start its command with the install line printed at the end. Needed by every bench that starts
# `python -m kernelwright ...` on the device (four_runners.py, round_speed.py's runner, profile_speed's
# reference profiles): without them the command line dies at import (no module named 'pydantic').
set -eu
cd "$(dirname "$0")/.."
WHEELS="pydantic==2.13.4 pydantic-core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2
optuna==4.6.0 cmaes==0.12.0 colorlog==6.10.1 sqlalchemy==2.0.44 alembic==1.17.2 mako==1.3.10 greenlet==3.2.4
openai==2.8.1 anthropic==0.75.0 jiter==0.12.0 distro==1.9.0 sniffio==1.3.1 docstring-parser==0.18.0"
mkdir -p .whl
for w in $WHEELS; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$w" \
        || echo "could not fetch $w" >&2
done
du -sh .whl
echo 'on the device: python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=$PWD:/tmp/site'
