"""Profile-test fixtures: Triton kernels really compiled for sm_90 (no GPU needed) in a subprocess.

The test session runs Triton in interpreter mode (tests/conftest.py), which cannot compile; a
fresh process without TRITON_INTERPRET can, with the CUDA toolchain Triton ships.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLCHAIN = Path(__file__).parent / "fixtures" / "toolchain"

_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from triton_kernels import compile_all
from kernelwright.profile.resources import triton_kernel_metadata
kernels = compile_all(sys.argv[2])
json.dump({n: triton_kernel_metadata(k) for n, k in kernels.items()}, open(sys.argv[2] + "/kw_metadata.json", "w"))
"""


@pytest.fixture(scope="session")
def compiled_triton(tmp_path_factory) -> Path:
    """Folder with add_kernel/matmul_kernel .ptx and .cubin, metadata.json and kw_metadata.json."""
    out = tmp_path_factory.mktemp("triton_sm90")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(REPO), TRITON_DEFAULT_FP_FUSION="1")
    try:
        done = subprocess.run([sys.executable, "-c", _SCRIPT, str(TOOLCHAIN), str(out)], env=env,
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.skip("compiling Triton kernels for sm_90 timed out")
    if done.returncode != 0:
        pytest.skip(f"Triton cannot compile for sm_90 here: {done.stderr.strip()[-300:]}")
    json.loads((out / "kw_metadata.json").read_text())
    return out
