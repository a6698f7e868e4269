"""Look at a report page in a real browser: headless Chromium renders REPORT.html, a screenshot is
saved (under $OUT when set), and the page must show ink and the DOM the browser built must hold
the results table.

    python bench/report_browser.py kw-runs/<suite>/report/report.html [--height 2400]

Needs Chromium (Debian: apt-get install chromium). Exit 0 when the page renders non-empty.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "report"))
import browser  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("page", type=Path)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args()
    if browser.chromium() is None:
        print("no Chromium found (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    shot = browser.screenshot(args.page, out / f"{args.page.stem}.png", height=args.height)
    ink = browser.inked_share(shot, 0, 800)
    dom = browser.rendered_text(args.page)
    ok = ink > 0.01 and "Results under" in dom
    print(f"{shot}: {ink:.1%} of the first 800 rows inked; DOM {len(dom)} characters, "
          f"{dom.count('<svg')} SVG plots: {'rendered' if ok else 'EMPTY'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
