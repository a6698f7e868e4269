"""peaks.py cache and fallback, env.environment(), and the `device-peaks` command."""
from __future__ import annotations

import json

import pytest
import torch
import typer
from typer.testing import CliRunner

from kernelwright.cli.gpu_cmd import register
from kernelwright.judge import env as kwenv
from kernelwright.judge import peaks as kwpeaks
from kernelwright.judge.peaks import Peaks

# hand-written record, as `device-peaks` would write it
SAMPLE = Peaks("NVIDIA H100 80GB HBM3", "570.86", copy_gbps=2950.0,
               tflops={"fp32": 51.0, "tf32": 380.0, "bf16": 720.0, "fp16": 740.0}, measured_at="2026-01-01T00:00:00")


def test_save_and_load_are_keyed_by_device_and_driver(tmp_path):
    kwpeaks.save_peaks(SAMPLE, tmp_path)
    assert kwpeaks.load_peaks(SAMPLE.device_name, "570.86", tmp_path) == SAMPLE
    assert kwpeaks.load_peaks(SAMPLE.device_name, "575.00", tmp_path) is None  # new driver: measure again
    assert kwpeaks.load_peaks("NVIDIA H200", "570.86", tmp_path) is None
    other = Peaks("NVIDIA H200", "570.86", 4200.0, {"bf16": 800.0})
    kwpeaks.save_peaks(other, tmp_path)
    data = json.loads(kwpeaks.peaks_path(tmp_path).read_text())
    assert len(data) == 2  # saving one device keeps the others


def test_corrupt_cache_reads_as_missing(tmp_path):
    kwpeaks.peaks_path(tmp_path).parent.mkdir(parents=True, exist_ok=True)
    kwpeaks.peaks_path(tmp_path).write_text("{not json")
    assert kwpeaks.load_peaks(SAMPLE.device_name, "570.86", tmp_path) is None


def test_datasheet_fallback_is_marked():
    sxm = kwpeaks.datasheet_peaks("NVIDIA H100 80GB HBM3")
    assert sxm.source == "datasheet: H100 SXM" and sxm.tflops["bf16"] > sxm.tflops["tf32"] > sxm.tflops["fp32"]
    assert kwpeaks.datasheet_peaks("NVIDIA H100 PCIe").source == "datasheet: H100 PCIe"
    assert kwpeaks.datasheet_peaks("NVIDIA GeForce RTX 4090") is None


def test_peaks_for_prefers_measured_over_datasheet(tmp_path, monkeypatch):
    monkeypatch.setattr(kwenv, "device_name", lambda device="cuda": SAMPLE.device_name)
    monkeypatch.setattr(kwenv, "driver_version", lambda: "570.86")
    assert kwpeaks.peaks_for("cuda", tmp_path).source.startswith("datasheet")
    kwpeaks.save_peaks(SAMPLE, tmp_path)
    assert kwpeaks.peaks_for("cuda", tmp_path) == SAMPLE
    assert kwpeaks.peaks_for("cpu", tmp_path) is None


def test_environment_never_raises_and_names_versions():
    record = kwenv.environment("cpu")
    assert record["torch"] == torch.__version__ and record["python"]
    assert "hostname" in record and "nvcc" in record
    assert kwenv.environment("cuda:7")["device"] == "cuda:7"  # absent GPU: fields missing, no error
    json.dumps(record)  # goes into the verdict as JSON


def test_device_peaks_command_without_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    app = typer.Typer()
    register(app)

    @app.command()
    def other():  # a second command so typer keeps sub-command names
        pass

    result = CliRunner().invoke(app, ["device-peaks"])
    assert result.exit_code == 1
    assert "needs a CUDA GPU" in result.output


@pytest.mark.gpu
def test_measured_peaks_are_plausible():
    peaks = kwpeaks.measure_peaks("cuda")
    assert peaks.copy_gbps > 100
    assert peaks.tflops["bf16"] > peaks.tflops["fp32"]
    assert peaks.source == "measured" and peaks.driver


def test_cache_root_follows_kw_cache_dir(tmp_path, monkeypatch):
    """Sandboxed workers get a scratch HOME; KW_CACHE_DIR points them at the shared cache."""
    monkeypatch.setenv("KW_CACHE_DIR", str(tmp_path))
    assert kwpeaks.peaks_path() == tmp_path / "peaks.json"
    assert kwenv.cache_root("/explicit") == __import__("pathlib").Path("/explicit")


def test_implausible_peaks_are_measured_again_and_then_named():
    """Peaks measured while other work shared the GPU came out 2.3x low: a value outside 0.5-1.2x
    its datasheet figure is measured again; twice outside, it is named in the record."""
    from kernelwright.judge import peaks as peaks_module

    sheet = peaks_module.datasheet_peaks("NVIDIA H100 80GB HBM3", "580")
    low = peaks_module.Peaks("NVIDIA H100 80GB HBM3", "580", sheet.copy_gbps / 2.3, dict(sheet.tflops))
    good = peaks_module.Peaks("NVIDIA H100 80GB HBM3", "580", sheet.copy_gbps * 0.9,
                              {k: v * 0.7 for k, v in sheet.tflops.items()})
    assert set(peaks_module.implausible(low, sheet)) == {"copy_gbps"}
    assert not peaks_module.implausible(good, sheet)
    runs, pauses = iter([low, good]), []
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(peaks_module, "measure_peaks", lambda device: next(runs))
        again = peaks_module.measure_checked("cuda", sleep=pauses.append)
    assert again is good and not again.notes and pauses == [peaks_module.RETRY_PAUSE_S]
    runs = iter([low, low])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(peaks_module, "measure_peaks", lambda device: next(runs))
        twice = peaks_module.measure_checked("cuda", sleep=lambda s: None)
    assert twice.notes and "copy_gbps" in twice.notes[0] and "0.43x" in twice.notes[0]


def test_named_implausible_peaks_give_way_to_the_datasheet(tmp_path, monkeypatch):
    from kernelwright.judge import env, peaks as peaks_module

    monkeypatch.setattr(env, "device_name", lambda device: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(env, "driver_version", lambda: "580")
    sheet = peaks_module.datasheet_peaks("NVIDIA H100 80GB HBM3", "580")
    flagged = peaks_module.Peaks("NVIDIA H100 80GB HBM3", "580", 1300.0, dict(sheet.tflops),
                                 notes=["copy_gbps measured 1300 twice, 0.43x the datasheet's 3000"])
    peaks_module.save_peaks(flagged, tmp_path)
    used = peaks_module.peaks_for("cuda", tmp_path)
    assert used.source.startswith("datasheet") and "implausible" in used.source and used.copy_gbps == sheet.copy_gbps
