"""Energy: trapezoid integration, the sampling thread, and the no-GPU path."""
import importlib.util
import shutil
import threading
import time

import pytest

from kernelwright.profile.energy import (
    EnergyMeter, EnergyReading, PowerSampler, integrate, measure_energy, nvml_device_id, parse_smi_line,
)


def test_integrate_trapezoid_over_the_window():
    samples = [(0.0, 100.0), (1.0, 200.0), (2.0, 200.0)]
    assert integrate(samples, 0.0, 2.0) == pytest.approx(150.0 + 200.0)
    # edges interpolated: 150 W at 0.5 s, 200 W at 1.5 s
    assert integrate(samples, 0.5, 1.5) == pytest.approx(0.5 * (150.0 + 200.0) / 2 + 0.5 * 200.0)
    assert integrate(samples, -1.0, 0.0) == pytest.approx(100.0)  # before the first sample: held


def test_integrate_window_between_two_samples_uses_the_nearest_readings():
    assert integrate([(0.0, 300.0), (1.0, 300.0)], 0.2, 0.4) == pytest.approx(60.0)
    assert integrate([], 0.0, 1.0) is None
    assert integrate([(0.0, 1.0)], 1.0, 1.0) is None


def test_sampler_thread_reads_at_its_period():
    five = threading.Event()  # waited for, not slept on: a loaded machine may run the thread late
    reads = []

    def read() -> float:
        reads.append(1)
        if len(reads) > 5:  # the fifth sample is stored before the sixth read
            five.set()
        return 250.0

    sampler = PowerSampler(read, period_s=0.005).start()
    assert five.wait(60), "the sampler thread did not read five times in 60 s"
    sampler.stop()
    assert len(sampler.samples) >= 5
    start, end = sampler.samples[0][0], sampler.samples[-1][0]
    assert integrate(sampler.samples, start, end) == pytest.approx(250.0 * (end - start))


def test_a_failing_reader_stops_sampling_with_the_error():
    def broken():
        raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    sampler = PowerSampler(broken, period_s=0.001).start()
    sampler._thread.join(60)  # the thread ends by itself at the first error
    assert not sampler._thread.is_alive()
    sampler.stop()
    assert sampler.samples == [] and "GPU_IS_LOST" in sampler.errors[0]


@pytest.mark.parametrize("line, watts", [("71.23", 71.23), ("71.23 W", 71.23), ("[N/A]", None), ("", None)])
def test_parse_smi_line(line, watts):
    assert parse_smi_line(line) == watts


def test_cuda_visible_devices_renumbering(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert nvml_device_id(0) == 3 and nvml_device_id(1) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-8f6c2a7e-0000")
    assert nvml_device_id(0) == "GPU-8f6c2a7e-0000"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml_device_id(2) == 2


def test_without_nvml_or_nvidia_smi_the_reading_says_unavailable(monkeypatch):
    if importlib.util.find_spec("pynvml"):
        pytest.skip("pynvml is installed here")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    calls = []
    reading = measure_energy(lambda: calls.append(1), min_seconds=0.05)
    assert reading.method == "unavailable" and reading.joules is None and reading.joules_per_call is None
    assert "NVML unavailable" in reading.note and "nvidia-smi not found" in reading.note
    assert reading.calls == len(calls) == 1  # no point spending the window without a meter


def test_reading_round_trips_and_divides_per_call():
    reading = EnergyReading("nvml-energy", joules=2.0, seconds=1.0, calls=400, avg_watts=2.0, samples=50)
    back = EnergyReading.from_dict(reading.to_dict())
    assert back == reading and back.joules_per_call == pytest.approx(0.005)
    assert reading.to_dict()["joules_per_call"] == pytest.approx(0.005)


def test_meter_as_context_manager_times_the_window(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with EnergyMeter() as meter:
        time.sleep(0.02)
    reading = meter.reading(calls=4)
    assert reading.seconds >= 0.02 and reading.calls == 4


def test_nvidia_smi_fallback_integrates_its_readings(tmp_path, monkeypatch):
    """A stand-in `nvidia-smi` (a shell loop printing 150 W every 10 ms) exercises the subprocess path."""
    if importlib.util.find_spec("pynvml"):
        pytest.skip("pynvml is installed here, NVML would be used instead")
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nwhile true; do echo 150.00; sleep 0.01; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    reading = measure_energy(lambda: time.sleep(0.002), min_seconds=1.0)
    assert reading.method == "nvidia-smi" and reading.samples >= 2  # the loop runs slower on a loaded machine
    assert reading.avg_watts == pytest.approx(150.0, rel=0.05)
    assert reading.joules_per_call == pytest.approx(150.0 * reading.seconds / reading.calls, rel=0.05)


class FakeNvml:
    """pynvml's calls the meter makes, counted: driver initialisations and energy counter reads (mJ)."""

    def __init__(self):
        self.inits, self.counter = 0, 1000

    def nvmlInit(self):
        self.inits += 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.counter += 250
        return self.counter

    def nvmlDeviceGetPowerUsage(self, handle):
        return 300_000


def test_prepare_opens_nvml_before_the_window_and_the_reading_keeps_its_fields(monkeypatch):
    import sys

    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    meter = EnergyMeter(0).prepare()
    assert fake.inits == 1
    with meter:  # the window only reads the counter: no second initialisation
        time.sleep(0.01)
    assert fake.inits == 1
    reading = meter.reading(calls=10)
    assert reading.method == "nvml-energy" and reading.joules == pytest.approx(0.25)
    assert reading.joules_per_call == pytest.approx(0.025)
    assert set(reading.to_dict()) == {"method", "joules", "seconds", "calls", "avg_watts", "samples", "note",
                                      "power_joules", "joules_per_call"}


def test_a_meter_that_could_not_be_prepared_says_why_in_its_window(monkeypatch):
    import sys

    class Broken(FakeNvml):
        def nvmlInit(self):
            raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    monkeypatch.setitem(sys.modules, "pynvml", Broken())
    monkeypatch.setattr(shutil, "which", lambda name: None)
    meter = EnergyMeter(0).prepare()
    with meter:
        pass
    reading = meter.reading(calls=1)
    assert reading.method == "unavailable" and "NVML unavailable (OSError: libnvidia-ml" in reading.note
