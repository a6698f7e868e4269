"""Small hand-made SVG plots for the report page: inline, no script, no network, no plotting library.

Speedups are drawn on a log scale (a 0.5x and a 2x are as far from 1x), with the 1x line marked.
Each mark carries a <title>, so a browser shows the problem and the value on hover.
"""
from __future__ import annotations

import math
from html import escape

W, PAD_L, PAD_R, PAD_T, PAD_B = 640, 150, 20, 28, 36
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")


def _fmt(value: float) -> str:
    return f"{value:.3g}x"


def _log_range(values: list[float]) -> tuple[float, float]:
    logs = [math.log10(v) for v in values if v and v > 0] + [0.0]  # 1x always shown
    lo, hi = min(logs), max(logs)
    if hi - lo < 0.3:
        lo, hi = lo - 0.15, hi + 0.15
    span = hi - lo
    return lo - 0.05 * span, hi + 0.05 * span


def _ticks(lo: float, hi: float) -> list[float]:
    """Values (not logs) to label on a log axis from 10**lo to 10**hi."""
    out = []
    for exp in range(math.floor(lo), math.ceil(hi) + 1):
        for mult in ((1, 2, 5) if hi - lo < 2.5 else (1,)):
            value = mult * 10.0 ** exp
            if lo <= math.log10(value) <= hi:
                out.append(value)
    return out


class _Frame:
    """A plot area with a log y (or x) scale for speedups."""

    def __init__(self, height: int, lo: float, hi: float, title: str):
        self.height, self.lo, self.hi, self.title = height, lo, hi, title
        self.parts: list[str] = []

    def x_log(self, value: float) -> float:
        value = max(value, 10 ** self.lo)
        return PAD_L + (math.log10(value) - self.lo) / (self.hi - self.lo) * (W - PAD_L - PAD_R)

    def y_log(self, value: float) -> float:
        value = max(value, 10 ** self.lo)
        return self.height - PAD_B - (math.log10(value) - self.lo) / (self.hi - self.lo) * (
            self.height - PAD_T - PAD_B)

    def svg(self) -> str:
        head = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {self.height}" width="{W}" '
                f'height="{self.height}" role="img" aria-label="{escape(self.title)}">'
                f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
                f'{escape(self.title)}</text>')
        return head + "".join(self.parts) + "</svg>"


def strip_plot(groups: dict[str, list[tuple[float, str]]], title: str, failed: dict[str, int] | None = None,
               axis_label: str = "speedup (log scale)") -> str:
    """One row per group (a level): a dot per correct problem at its speedup; failed ones counted."""
    failed = failed or {}
    values = [v for items in groups.values() for v, _ in items]
    lo, hi = _log_range(values)
    row_h = 46
    frame = _Frame(PAD_T + PAD_B + row_h * max(1, len(groups)), lo, hi, title)
    bottom = frame.height - PAD_B
    for value in _ticks(lo, hi):
        x = frame.x_log(value)
        frame.parts.append(f'<line x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{bottom}" stroke="#ddd"/>'
                           f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">'
                           f'{_fmt(value)}</text>')
    one = frame.x_log(1.0)
    frame.parts.append(f'<line x1="{one:.1f}" y1="{PAD_T}" x2="{one:.1f}" y2="{bottom}" stroke="#555" '
                       f'stroke-dasharray="4 3"/>')
    for row, (name, items) in enumerate(groups.items()):
        y = PAD_T + row_h * row + row_h / 2
        counts = f"{len(items)} correct" + (f", {failed[name]} failed" if failed.get(name) else "")
        frame.parts.append(f'<text x="{PAD_L - 8}" y="{y - 2:.1f}" text-anchor="end" font-size="11">'
                           f'{escape(name[:22])}</text><text x="{PAD_L - 8}" y="{y + 11:.1f}" text-anchor="end" '
                           f'font-size="10" fill="#666">{escape(counts)}</text>')
        for i, (value, who) in enumerate(sorted(items)):
            jitter = ((i * 7) % 5 - 2) * 5  # deterministic spread so equal values stay visible
            frame.parts.append(f'<circle cx="{frame.x_log(value):.1f}" cy="{y + jitter:.1f}" r="4" '
                               f'fill="{COLORS[row % len(COLORS)]}" fill-opacity="0.75">'
                               f'<title>{escape(who)}: {_fmt(value)}</title></circle>')
    frame.parts.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{frame.height - 4}" text-anchor="middle" '
                       f'font-size="11">{escape(axis_label)}</text>')
    return frame.svg()


def scatter(points: list[tuple[float, float, str]], title: str, x_label: str = "% of the speed-of-light floor",
            y_label: str = "speedup (log)") -> str:
    """x linear (0 to 100 % and beyond), y a log speedup; one dot per (x, y, label)."""
    height = 300
    lo, hi = _log_range([y for _, y, _ in points])
    frame = _Frame(height, lo, hi, title)
    x_max = max([100.0] + [x for x, _, _ in points])
    bottom = height - PAD_B

    def x_lin(value: float) -> float:
        return PAD_L + value / x_max * (W - PAD_L - PAD_R)

    for tick in range(0, int(x_max) + 1, 25 if x_max <= 150 else 50):
        x = x_lin(tick)
        frame.parts.append(f'<line x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>'
                           f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">{tick}%</text>')
    for value in _ticks(lo, hi):
        y = frame.y_log(value)
        frame.parts.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" stroke="#eee"/>'
                           f'<text x="{PAD_L - 6}" y="{y + 3:.1f}" text-anchor="end" font-size="10">{_fmt(value)}'
                           f'</text>')
    one = frame.y_log(1.0)
    frame.parts.append(f'<line x1="{PAD_L}" y1="{one:.1f}" x2="{W - PAD_R}" y2="{one:.1f}" stroke="#555" '
                       f'stroke-dasharray="4 3"/>')
    for x, y, who in points:
        frame.parts.append(f'<circle cx="{x_lin(x):.1f}" cy="{frame.y_log(y):.1f}" r="4" fill="{COLORS[0]}" '
                           f'fill-opacity="0.75"><title>{escape(who)}: {x:.1f}% of floor, {_fmt(y)}</title>'
                           f'</circle>')
    frame.parts.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{height - 4}" text-anchor="middle" '
                       f'font-size="11">{escape(x_label)}</text>')
    frame.parts.append(f'<text x="14" y="{height / 2}" font-size="11" transform="rotate(-90 14 {height / 2})" '
                       f'text-anchor="middle">{escape(y_label)}</text>')
    return frame.svg()


def curves(series: dict[str, list[float | None]], title: str,
           x_label: str = "evaluations", y_label: str = "best speedup so far (log)") -> str:
    """One step line per problem: the best correct speedup after each evaluation."""
    height = 320
    values = [v for line in series.values() for v in line if v is not None]
    lo, hi = _log_range(values)
    frame = _Frame(height, lo, hi, title)
    longest = max([len(line) for line in series.values()] + [1])
    bottom = height - PAD_B

    def x_at(index: int) -> float:
        return PAD_L + index / max(1, longest - 1) * (W - PAD_L - PAD_R)

    step = max(1, round(longest / 10))
    for index in range(0, longest, step):
        frame.parts.append(f'<text x="{x_at(index):.1f}" y="{bottom + 14}" text-anchor="middle" font-size="10">'
                           f'{index + 1}</text>')
    for value in _ticks(lo, hi):
        y = frame.y_log(value)
        frame.parts.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" stroke="#eee"/>'
                           f'<text x="{PAD_L - 6}" y="{y + 3:.1f}" text-anchor="end" font-size="10">{_fmt(value)}'
                           f'</text>')
    for n, (name, line) in enumerate(series.items()):
        points = [(x_at(i), frame.y_log(v)) for i, v in enumerate(line) if v is not None]
        if not points:
            continue
        color = COLORS[n % len(COLORS)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        frame.parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.6">'
                           f'<title>{escape(name)}: best {_fmt(max(v for v in line if v is not None))}</title>'
                           f'</polyline>')
        last_x, last_y = points[-1]
        frame.parts.append(f'<circle cx="{last_x:.1f}" cy="{last_y:.1f}" r="3" fill="{color}">'
                           f'<title>{escape(name)}</title></circle>')
    frame.parts.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{height - 4}" text-anchor="middle" '
                       f'font-size="11">{escape(x_label)}</text>')
    frame.parts.append(f'<text x="14" y="{height / 2}" font-size="11" transform="rotate(-90 14 {height / 2})" '
                       f'text-anchor="middle">{escape(y_label)}</text>')
    return frame.svg()


def sparkline(line: list[float | None], width: int = 160, height: int = 34) -> str:
    """A problem's best-so-far curve in a table cell (log scale; empty before a correct candidate)."""
    values = [v for v in line if v is not None]
    if not values:
        return '<span class="muted">no correct candidate</span>'
    lo, hi = _log_range(values)
    n = max(1, len(line) - 1)
    points = " ".join(f"{2 + i / n * (width - 4):.1f},{height - 2 - (math.log10(v) - lo) / (hi - lo) * (height - 4):.1f}"
                      for i, v in enumerate(line) if v is not None)
    one = height - 2 - (0 - lo) / (hi - lo) * (height - 4)
    last_x, last_y = points.split()[-1].split(",")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f'<line x1="0" y1="{one:.1f}" x2="{width}" y2="{one:.1f}" stroke="#bbb" stroke-dasharray="3 2"/>'
            f'<polyline points="{points}" fill="none" stroke="{COLORS[0]}" stroke-width="1.5"/>'
            f'<circle cx="{last_x}" cy="{last_y}" r="2.5" fill="{COLORS[0]}"/>'
            f'<title>best so far after each of {len(line)} evaluations; last {_fmt(values[-1])}</title></svg>')
