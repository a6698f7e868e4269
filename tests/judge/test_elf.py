"""judge/elf.py: what a built library links and calls, read with the standard library."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelwright.judge.elf import ElfError, read_elf


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a test library")
def test_needed_libraries_and_undefined_and_defined_symbols(tmp_path):
    (tmp_path / "lib.c").write_text("#include <math.h>\nextern int vendorCall(int);\n"
                                    "double mine(double x) { return cos(x) + vendorCall(1); }\n")
    path = tmp_path / "lib.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(tmp_path / "lib.c"), "-Wl,--no-as-needed", "-lm"],
                   check=True)
    info = read_elf(path)
    assert any(lib.startswith("libm.so") for lib in info.needed)
    assert {"vendorCall", "cos"} <= info.undefined and "mine" in info.defined


def test_a_file_that_is_not_elf_is_an_error(tmp_path):
    path = tmp_path / "x.so"
    path.write_bytes(b"MZ" + b"\0" * 100)
    with pytest.raises(ElfError):
        read_elf(path)
