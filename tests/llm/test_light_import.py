"""`import kernelwright.llm` must work where the SDKs are absent (GPU worker machines)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHECK = """
import sys
import kernelwright.llm, kernelwright.llm.router, kernelwright.llm.parse
from kernelwright.llm import make_provider
from kernelwright.llm.config import LLMConfig
make_provider("exchange:/tmp/kw-unused", LLMConfig())
loaded = [m for m in ("openai", "anthropic", "httpx2") if m in sys.modules]
print(",".join(loaded) or "none")
"""

BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("openai", "anthropic"):
            raise ImportError("blocked for the test: " + name)
sys.meta_path.insert(0, Block())
""" + CHECK


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_import_does_not_load_the_sdks():
    result = run_python(CHECK)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"


def test_import_works_without_the_sdks_installed():
    result = run_python(BLOCKED)
    assert result.returncode == 0, result.stderr
