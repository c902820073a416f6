"""Render an HTML page with headless Chromium and check the screenshot is not blank (not all one colour).

    python scripts/render_check.py report/index.html --out /tmp/report.png

Exit code 0: rendered and not blank; 1: the screenshot is blank; 2: no Chromium found or it failed to render.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The first Chromium-family browser on PATH, or None."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


def render(html_path: Path, png_path: Path, width: int = 1400, height: int = 4000, timeout_s: float = 120) -> Path:
    """Screenshot ``html_path`` into ``png_path`` with headless Chromium; raises RuntimeError if that fails."""
    browser = find_chromium()
    if browser is None:
        raise RuntimeError(f"no Chromium on PATH (looked for {', '.join(BROWSERS)})")
    png_path = Path(png_path).resolve()
    with tempfile.TemporaryDirectory(prefix="render-check-") as profile:  # a fresh profile: no state, no locks
        command = [
            browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", f"--user-data-dir={profile}",
            f"--screenshot={png_path}", f"--window-size={width},{height}", Path(html_path).resolve().as_uri(),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0 or not png_path.is_file():
        raise RuntimeError(f"{browser} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return png_path


def distinct_colours(png_path: Path) -> int:
    """How many distinct RGB colours the image holds (1 means blank)."""
    from matplotlib.image import imread

    pixels = imread(png_path)[..., :3].reshape(-1, 3)
    return len(np.unique((pixels * 255).round().astype(np.uint8), axis=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path, help="the page to render")
    parser.add_argument("--out", type=Path, default=Path("render_check.png"), help="where to write the screenshot")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=4000)
    args = parser.parse_args(argv)
    if not args.html.is_file():
        print(f"no such file: {args.html}", file=sys.stderr)
        return 2
    try:
        shot = render(args.html, args.out, args.width, args.height)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"render failed: {exc}", file=sys.stderr)
        return 2
    colours = distinct_colours(shot)
    print(f"{shot}: {colours} distinct colours")
    if colours <= 1:
        print("blank screenshot: the page rendered as one colour", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
