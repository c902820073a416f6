"""How big a report folder is and how soon its page is interactive in headless Chromium: the time from navigation to
the explorer's ``data-plotted`` mark (every interactive figure drawn, the search and the model view live), and the
time a search for one model takes to highlight it in every figure and open its view. Target for the full atlas
(649 timm CNNs, every shipped table, the H200): <= 15 MB and interactive within 3 s on a 2-core machine.

Usage: python benchmarks/report_browser.py REPORT_DIR [--repeat N] [--model timm:convnext_tiny]
(REPORT_DIR: a folder written by `utilscope report STORE -o REPORT_DIR`; needs chromium, chromedriver and selenium:
scripts/install_browser.sh).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path

WIDTH = 1280
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={WIDTH},1000")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in FLAGS:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def wait_for(driver, script: str, limit_s: float = 120.0) -> float:
    """Seconds until ``script`` returns something true (polled every 10 ms)."""
    started = time.perf_counter()
    while not driver.execute_script(script):
        if time.perf_counter() - started > limit_s:
            raise TimeoutError(f"not true after {limit_s} s: {script}")
        time.sleep(0.01)
    return time.perf_counter() - started


def open_page(driver, page: Path) -> tuple[float, float, float]:
    """Seconds from the start of navigation to the load event, to the first figure drawn (the search and the model
    view answer from then on) and to every figure drawn."""
    driver.get("about:blank")
    driver.set_page_load_timeout(120)
    driver.get(page.as_uri())  # returns after the load event
    wait_for(driver, "return document.body && document.body.dataset.plotted")
    loaded = driver.execute_script("return performance.timing.loadEventEnd - performance.timing.navigationStart")
    first, every = driver.execute_script("return [document.body.dataset.firstMs, document.body.dataset.plottedMs]")
    return loaded / 1e3, float(first) / 1e3, float(every) / 1e3


def search(driver, model: str) -> tuple[float, int]:
    """Seconds for a search to list, highlight and open one model, and the rows its view shows."""
    box = driver.find_element("id", "model-search")
    started = time.perf_counter()
    box.send_keys(model)
    wait_for(driver, f"return document.body.dataset.searched === {model!r}")
    seconds = time.perf_counter() - started
    return seconds, driver.execute_script("return document.querySelectorAll('#model-rows tr[data-kind]').length")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="timm:convnext_tiny")
    args = parser.parse_args(argv)
    files = {path.name: path.stat().st_size for path in args.report.iterdir() if path.is_file()}
    largest = ", ".join(f"{name} {size / 1e6:.1f}" for name, size in sorted(files.items(), key=lambda f: -f[1])[:3])
    print(f"{args.report}: {sum(files.values()) / 1e6:.1f} MB in {len(files)} files (largest, MB: {largest})")
    print(f"{os.cpu_count()} CPUs")
    driver = browser()
    try:
        for attempt in range(args.repeat):
            loaded, first, every = open_page(driver, args.report / "index.html")
            seconds, rows = search(driver, args.model)
            print(
                f"run {attempt + 1}: load event {loaded:.2f} s, first figure (interactive) {first:.2f} s, every figure "
                f"{every:.2f} s; search {args.model} (typed, then highlighted in every figure and its view open): "
                f"{seconds:.2f} s, {rows} rows in its view"
            )
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
