"""A real browser looks at the report page: headless Chromium takes a screenshot of it, and the
screenshot must show something (not a blank page). Used by the report's tests and by
bench/report_browser.py; tests skip when no Chromium is installed (Debian: apt-get install chromium).
"""
from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium() -> str | None:
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="kw-chromium-") as profile:
        return subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--no-first-run", "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2400, timeout: float = 120) -> Path:
    """Render `page` (a file) and save a screenshot; raises when Chromium wrote nothing."""
    done = _run([f"--window-size={width},{height}", f"--screenshot={png}", Path(page).resolve().as_uri()], timeout)
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot ({done.returncode}): {done.stderr[-800:]}")
    return png


def rendered_text(page: Path, timeout: float = 120) -> str:
    """The page's DOM after Chromium loaded it (what the browser made of the file)."""
    return _run(["--dump-dom", Path(page).resolve().as_uri()], timeout).stdout


def pixels(png: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6), f"unexpected PNG format {header}"
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def inked_share(png: Path, rows_from: int = 0, rows_to: int | None = None) -> float:
    """Share of pixels (in a band of rows) that are not near-white: 0 for a blank page."""
    width, height, rows = pixels(png)
    band = rows[rows_from:rows_to or height]
    bpp = len(band[0]) // width
    inked = sum(1 for row in band for x in range(0, len(row), bpp) if min(row[x:x + 3]) < 200)
    return inked / (width * len(band))
