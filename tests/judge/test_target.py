"""The run's target: known cards, device files, and what the batch runner records."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kernelwright.judge.target import (DEVICE_FILE, Target, TargetError, known_target, load_target, read_device_file,
                                       write_device_file)


def test_known_cards_have_their_limits_and_datasheet_peaks_marked_as_such():
    h100 = known_target("H100")
    assert (h100.kind, h100.arch, h100.sm_count, h100.smem_per_block, h100.regs_per_thread) == \
        ("cuda", "sm_90", 132, 232448, 255)
    assert h100.peaks["source"].startswith("datasheet") and "not measured" in h100.source
    assert known_target("nvidia a100-sxm4").arch == "sm_80" and known_target("l4").max_threads_per_sm == 1536
    with pytest.raises(TargetError, match="known: h100"):
        known_target("tpu-v5")


def test_target_round_trips_and_validates(tmp_path):
    h100 = known_target("h100")
    path = tmp_path / DEVICE_FILE
    path.write_text(json.dumps(h100.to_dict()))
    assert load_target(path) == h100 and load_target(tmp_path) == h100 and read_device_file(tmp_path) == h100
    assert read_device_file(tmp_path / "nowhere") is None
    assert h100.label() == "NVIDIA H100 80GB HBM3 (sm_90)" and h100.tflops("fp32") == 67.0
    with pytest.raises(ValueError, match="kind"):
        Target(kind="tpu", name="x")
    path.write_text("{broken")
    with pytest.raises(TargetError, match="not a readable device file"):
        load_target(path)


def test_the_batch_runner_records_its_device_on_first_contact(tmp_path):
    """On this CPU machine: a CPU target with the interpreter flag; kept when already there."""
    done = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(tmp_path), "--profile-budget", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    target = read_device_file(tmp_path)
    if target.is_gpu:
        pytest.skip("this machine has a GPU: covered by the GPU test")
    assert target.kind == "cpu" and target.interpreter and target.software.get("torch")
    before = (tmp_path / DEVICE_FILE).stat().st_mtime_ns
    again = subprocess.run([sys.executable, "-m", "kernelwright.judge.scheduling.batch", str(tmp_path), "--profile-budget", "0"],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and (tmp_path / DEVICE_FILE).stat().st_mtime_ns == before  # first contact only


@pytest.mark.gpu
def test_the_device_file_holds_measured_gpu_facts(tmp_path):
    path = write_device_file(tmp_path, measure_peaks=True)
    target = load_target(path)
    assert target.is_gpu and target.sm_count and target.smem_per_block and target.regs_per_sm
    assert target.peaks["source"] == "measured" and target.peaks["copy_gbps"] > 100


def test_the_device_file_follows_the_peaks_the_judge_uses_now(tmp_path, monkeypatch):
    """A batch folder's device file and the verdicts' floors come from one peaks record: peaks
    measured again since the file was written (implausible ones are) replace the file's."""
    from pathlib import Path

    from kernelwright.judge import target as target_module

    recorded = json.loads((Path(__file__).parents[1] / "fixtures" / "golden" / "h100_device.json").read_text())
    now = {"peaks": dict(recorded["peaks"])}
    monkeypatch.setattr(target_module, "detect_target",
                        lambda device="auto", measure_peaks=False: Target.from_dict({**recorded, **now}))
    path = write_device_file(tmp_path, measure_peaks=False)
    assert read_device_file(tmp_path).peaks["tflops"]["bf16"] == 718.0
    before = path.stat().st_mtime_ns
    write_device_file(tmp_path, measure_peaks=False)
    assert path.stat().st_mtime_ns == before  # the same record: kept
    now["peaks"] = {**recorded["peaks"], "tflops": {**recorded["peaks"]["tflops"], "bf16": 700.0}}
    write_device_file(tmp_path, measure_peaks=False)
    assert read_device_file(tmp_path).peaks["tflops"]["bf16"] == 700.0  # measured again since: replaced
    now["peaks"] = {**recorded["peaks"], "source": "datasheet (not measured)"}
    write_device_file(tmp_path, measure_peaks=False)
    assert read_device_file(tmp_path).peaks["tflops"]["bf16"] == 700.0  # no measured record here: the file's stands


def test_the_installed_triton_is_probed_by_introspection():
    pytest.importorskip("triton")
    from kernelwright.agents.software import version_tuple
    from kernelwright.judge.target import TRITON_PROBES, probe_triton_features

    import triton

    found = probe_triton_features()
    assert set(found) == set(TRITON_PROBES) and all(isinstance(v, bool) for v in found.values())
    version = version_tuple(triton.__version__)
    if version >= (3, 4):  # tensor descriptors renamed public in 3.4 (agents/software.py's table)
        assert found["tl.make_tensor_descriptor"] and found['tl.dot(..., input_precision="tf32x3")']


def test_a_triton_without_the_features_is_probed_as_missing_them():
    from types import SimpleNamespace

    from kernelwright.judge.target import probe_triton_features

    def load(pointer, mask=None, other=None):  # an old tl.load: no eviction_policy
        return pointer

    def dot(a, b, acc=None, input_precision=None):
        return a

    class Range:
        def __init__(self, start, end=None, step=None, num_stages=None):
            pass

    old_tl = SimpleNamespace(__name__="no_such_triton.language", load=load, dot=dot, range=Range)
    old_ir = SimpleNamespace(INPUT_PRECISION=SimpleNamespace(TF32=0, IEEE=1, TF32x3=2))
    found = probe_triton_features(old_tl, old_ir)
    assert found['tl.dot(..., input_precision="tf32x3")'] and not found['tl.dot(..., input_precision="bf16x3")']
    assert found["tl.range(..., num_stages=...)"] and not found["tl.range(..., warp_specialize=...)"]
    assert not found["tl.make_tensor_descriptor"] and not found["tl.fdiv"]
    assert not found["tl.load(..., eviction_policy=...)"] and not found["tl.extra.cuda.libdevice"]
    assert not any(probe_triton_features(SimpleNamespace(__name__="x"), SimpleNamespace()).values())  # probes raised


def test_the_triton_features_round_trip_through_the_device_file(tmp_path, monkeypatch):
    from pathlib import Path

    from kernelwright.agents.software import triton_support
    from kernelwright.judge import target as target_module

    recorded = json.loads((Path(__file__).parents[1] / "fixtures" / "golden" / "h100_device.json").read_text())
    features = {"tl.fdiv": True, "tl.make_tensor_descriptor": False}
    probed = Target.from_dict({**recorded, "triton_features": features})
    assert Target.from_dict(json.loads(json.dumps(probed.to_dict()))) == probed
    monkeypatch.setattr(target_module, "detect_target", lambda device="auto", measure_peaks=False: probed)
    (tmp_path / DEVICE_FILE).write_text(json.dumps(recorded))  # written before the probe: no features
    write_device_file(tmp_path, measure_peaks=False)
    stored = read_device_file(tmp_path)
    assert stored.triton_features == features  # rewritten with them
    assert triton_support(stored) == {"available": ["`tl.fdiv`"], "missing": ["`tl.make_tensor_descriptor`"]}


def test_a_detected_cpu_target_carries_the_probe():
    pytest.importorskip("triton")
    from kernelwright.judge.target import detect_target

    target = detect_target("cpu")
    assert target.triton_features and "tl.fdiv" in target.triton_features
