"""Energy per call: GPU power sampled in a background thread while a timed loop runs.

Backends, best first: NVML's total-energy counter (exact, Volta and later), NVML power readings
integrated over time, `nvidia-smi --query-gpu=power.draw -lms` sampled from a subprocess. Without
any of them the reading says "unavailable" and why; it never raises. Power readings are averaged by
the board over tens of milliseconds, so the timed window should last well beyond that
(`measure_energy` repeats the callable for at least `min_seconds`).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

SAMPLE_PERIOD_S = 0.02


@dataclass
class EnergyReading:
    method: str  # "nvml-energy", "nvml-power", "nvidia-smi", "unavailable"
    joules: float | None = None
    seconds: float = 0.0
    calls: int = 0
    avg_watts: float | None = None
    samples: int = 0
    note: str = ""
    power_joules: float | None = None  # integrated power samples: a cross-check of the counter

    @property
    def joules_per_call(self) -> float | None:
        if self.joules is None or self.calls <= 0:
            return None
        return self.joules / self.calls

    def to_dict(self) -> dict:
        return {
            "method": self.method, "joules": self.joules, "seconds": self.seconds, "calls": self.calls,
            "avg_watts": self.avg_watts, "samples": self.samples, "note": self.note,
            "power_joules": self.power_joules, "joules_per_call": self.joules_per_call,
        }

    @classmethod
    def from_dict(cls, data: dict) -> "EnergyReading":
        keys = ("method", "joules", "seconds", "calls", "avg_watts", "samples", "note", "power_joules")
        return cls(**{k: data[k] for k in keys if k in data})


def _power_at(points: list[tuple[float, float]], t: float) -> float:
    """Power at time `t`: linear between the samples around it, held flat beyond the first/last."""
    before = [p for p in points if p[0] <= t]
    after = [p for p in points if p[0] >= t]
    if not before:
        return after[0][1]
    if not after:
        return before[-1][1]
    (t0, w0), (t1, w1) = before[-1], after[0]
    return w0 if t1 == t0 else w0 + (w1 - w0) * (t - t0) / (t1 - t0)


def integrate(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Joules from (time_s, watts) samples over [start, end] by the trapezoid rule.

    The window edges get interpolated readings, and power before the first sample or after the
    last is held constant, so a window shorter than the sampling period still gets an estimate.
    """
    if not samples or end <= start:
        return None
    points = sorted(samples)
    inside = [(t, w) for t, w in points if start < t < end]
    curve = [(start, _power_at(points, start))] + inside + [(end, _power_at(points, end))]
    return sum((t1 - t0) * (w0 + w1) / 2.0 for (t0, w0), (t1, w1) in zip(curve, curve[1:], strict=False))


@dataclass
class PowerSampler:
    """Calls `read_watts()` every `period_s` seconds in a daemon thread between start() and stop()."""

    read_watts: Callable[[], float]
    period_s: float = SAMPLE_PERIOD_S
    samples: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.samples.append((time.perf_counter(), float(self.read_watts())))
            except Exception as exc:  # noqa: BLE001 -- a failing driver call ends sampling, it must not kill the run
                self.errors.append(str(exc))
                return
            self._stop.wait(self.period_s)

    def start(self) -> "PowerSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


def parse_smi_line(line: str) -> float | None:
    """A `nvidia-smi --query-gpu=power.draw --format=csv,noheader,nounits` line -> watts."""
    text = line.strip().split(",")[0].strip().removesuffix("W").strip()
    try:
        return float(text)
    except ValueError:
        return None


def nvml_device_id(torch_index: int = 0) -> str | int:
    """The NVML handle key of CUDA device `torch_index`: CUDA_VISIBLE_DEVICES renumbers devices."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if torch_index < len(visible):
        entry = visible[torch_index]
        return int(entry) if entry.isdigit() else entry  # an index or a GPU-/MIG- UUID
    return torch_index


def _nvml_handle(torch_index: int):
    import pynvml  # noqa: PLC0415 -- nvidia-ml-py is optional (not a dependency): without it no energy reading

    pynvml.nvmlInit()
    key = nvml_device_id(torch_index)
    if isinstance(key, int):
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(key)
    return pynvml, pynvml.nvmlDeviceGetHandleByUUID(key)


class EnergyMeter:
    """Context manager around a timed loop: `with EnergyMeter(0) as m: ...; m.reading(calls)`."""

    def __init__(self, torch_index: int = 0, period_s: float = SAMPLE_PERIOD_S):
        self.torch_index, self.period_s = torch_index, period_s
        self.method, self.note = "unavailable", ""
        self._sampler: PowerSampler | None = None
        self._smi: subprocess.Popen | None = None
        self._smi_samples: list[tuple[float, float]] = []
        self._energy_mj: tuple[float, float] | None = None
        self._nvml = None
        self._nvml_error: Exception | None = None
        self.start_t = self.end_t = 0.0

    def prepare(self) -> "EnergyMeter":
        """Open the NVML handle now (driver initialisation takes a while), so that entering the
        window later only reads the counter. Never raises: a failure is met again on entering."""
        if self._nvml is None and self._nvml_error is None:
            try:
                self._nvml = _nvml_handle(self.torch_index)
            except Exception as exc:  # noqa: BLE001 -- no pynvml, no driver, no such device
                self._nvml_error = exc
        return self

    def __enter__(self) -> "EnergyMeter":
        self._open()
        self.start_t = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.end_t = time.perf_counter()
        self._close()

    def _open(self) -> None:
        self.prepare()
        if self._nvml is None:
            exc = self._nvml_error
            self.note = f"NVML unavailable ({type(exc).__name__}: {exc})"
            self._open_smi()
            return
        pynvml, handle = self._nvml
        try:
            start = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            self._energy_mj = (float(start), float("nan"))
            self.method = "nvml-energy"
        except Exception:  # noqa: BLE001 -- counter not supported on this GPU: integrate power instead
            self.method = "nvml-power"
        self._sampler = PowerSampler(lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, self.period_s)
        self._sampler.start()

    def _open_smi(self) -> None:
        smi = shutil.which("nvidia-smi")
        if not smi:
            self.note += "; nvidia-smi not found"
            return
        key = nvml_device_id(self.torch_index)
        cmd = [smi, f"--id={key}", "--query-gpu=power.draw", "--format=csv,noheader,nounits",
               f"-lms={max(1, int(self.period_s * 1000))}"]
        try:
            self._smi = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError as exc:
            self.note += f"; nvidia-smi failed to start: {exc}"
            return
        self.method = "nvidia-smi"
        threading.Thread(target=self._read_smi, daemon=True).start()
        time.sleep(self.period_s * 2)  # let the first reading arrive before the window opens

    def _read_smi(self) -> None:
        for line in self._smi.stdout:
            watts = parse_smi_line(line)
            if watts is not None:
                self._smi_samples.append((time.perf_counter(), watts))

    def _close(self) -> None:
        if self._energy_mj is not None:
            try:
                pynvml, handle = self._nvml
                self._energy_mj = (self._energy_mj[0], float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)))
            except Exception as exc:  # noqa: BLE001 -- any driver failure falls back to integrated power, and says so
                self.note = f"energy counter read failed ({exc}); integrated power instead"
                self._energy_mj, self.method = None, "nvml-power"
        if self._sampler:
            self._sampler.stop()
        if self._smi:
            time.sleep(self.period_s * 2)  # one reading past the end of the window
            self._smi.terminate()
            try:
                self._smi.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._smi.kill()

    def samples(self) -> list[tuple[float, float]]:
        return list(self._sampler.samples) if self._sampler else list(self._smi_samples)

    def reading(self, calls: int) -> EnergyReading:
        seconds = self.end_t - self.start_t
        samples = self.samples()
        if self.method == "unavailable":
            return EnergyReading("unavailable", seconds=seconds, calls=calls, note=self.note.strip("; "))
        power_joules = integrate(samples, self.start_t, self.end_t)
        joules = power_joules
        if self._energy_mj is not None:
            joules = (self._energy_mj[1] - self._energy_mj[0]) / 1000.0
        watts = joules / seconds if joules is not None and seconds > 0 else None
        note = self.note.strip("; ")
        if joules is None:
            note = (note + "; no power samples in the window").strip("; ")
        return EnergyReading(self.method, joules, seconds, calls, watts, len(samples), note, power_joules)


def measure_energy(fn: Callable[[], object], sync: Callable[[], object] | None = None,
                   min_seconds: float = 0.5, torch_index: int = 0, max_calls: int = 100_000) -> EnergyReading:
    """Run `fn` repeatedly for at least `min_seconds` inside an EnergyMeter; joules per call."""
    sync = sync or (lambda: None)
    sync()
    calls = 0
    with EnergyMeter(torch_index) as meter:
        deadline = time.perf_counter() + min_seconds
        if meter.method == "unavailable":  # nothing to measure: do not spend the window
            max_calls = 1
        while calls < max_calls and (calls == 0 or time.perf_counter() < deadline):
            fn()
            calls += 1
            if calls % 8 == 0:
                sync()  # keep the host from racing ahead of the device and the window honest
        sync()
    return meter.reading(calls)
