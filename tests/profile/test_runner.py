"""The profiled program: what it finds in a candidate module, and its JSON on success and failure."""
import _ctypes
import json
import types

from kernelwright.profile import runner

RELU = "level1/19_ReLU.py"


def test_extension_binaries_are_the_shared_libraries_a_candidate_holds():
    module = types.ModuleType("candidate")
    module.ext = _ctypes  # a compiled extension, like a load_inline module
    module.json = json  # a pure-Python module
    assert runner.extension_binaries(module) == [_ctypes.__file__]


def test_no_triton_kernels_in_a_module_without_any():
    module = types.ModuleType("candidate")
    module.weird = types.SimpleNamespace(fn=types.SimpleNamespace(fn=None))
    assert runner.triton_kernels(module, None) == []


def test_ncu_mode_runs_the_forwards_and_reports_json(kernelbench, tmp_path):
    candidate = tmp_path / "c.py"
    candidate.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
                         "        return x.clamp_min(0)\n")
    out = tmp_path / "out.json"
    code = runner.main(["--problem", str(kernelbench / RELU), "--candidate", str(candidate), "--mode", "ncu",
                        "--out", str(out), "--overrides", json.dumps({"batch_size": 4, "dim": 64}), "--calls", "2"])
    data = json.loads(out.read_text())
    assert code == 0 and data["ok"] and data["stage"] == "done" and data["calls"] == 2 and data["device"] == "cpu"


def test_a_missing_candidate_is_a_json_error(kernelbench, tmp_path):
    out = tmp_path / "out.json"
    code = runner.main(["--problem", str(kernelbench / RELU), "--candidate", str(tmp_path / "nope.py"),
                        "--mode", "timeline", "--out", str(out)])
    data = json.loads(out.read_text())
    assert code == 1 and not data["ok"] and data["stage"] == "load" and "nope.py" in data["error"]
