"""Screenshots of the labelling page for the docs (docs/images/annotate-*.png).

Scores the demo records with the judge from the demo's judge cache (offline) into a temporary
folder, serves them with ``rageval annotate`` (blind, then ``--show-judge``) and photographs
the page in headless Chromium under Debian's chromedriver (``apt-get install chromium
chromium-driver``; Selenium from the test extra). Each picture is 1000 px wide, reduced to a
palette and optimised, so that it stays a few dozen KiB::

    python scripts/annotate_screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from PIL import Image
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.support.ui import WebDriverWait

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo"
METRIC = "judge:faithfulness"
ENTRY = "import sys; from rageval.cli import main; sys.exit(main())"
WIDTH = 1000
CHROMEDRIVER = "/usr/bin/chromedriver"


def score_demo(out: Path) -> Path:
    """The demo records judged for faithfulness from the demo's judge cache."""
    sys.path.insert(0, str(ROOT))
    from rageval.cli import main

    code = main(["score", str(DEMO / "records.jsonl"), "-m", METRIC, "--judge-model",
                 "smollm2-135m-instruct", "--cache", str(DEMO / "judge_cache.jsonl"),
                 "--offline", "--out", str(out), "--no-progress"], stdout=io.StringIO())
    if code != 0:
        raise SystemExit(f"scoring the demo failed with exit status {code}")
    return out


@contextmanager
def annotate(run: Path, labels: Path, *extra: str) -> Iterator[str]:
    """``rageval annotate`` on ``run``; the address it printed, token included."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, "-c", ENTRY, "annotate", str(run), "--metric",
                                METRIC, "--labels", str(labels), "--annotator", "ana", *extra],
                               stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        match = re.fullmatch(r"open (\S+)\n", process.stdout.readline())
        if not match:
            raise SystemExit("rageval annotate did not print its address")
        yield match[1]
    finally:
        process.terminate()
        process.wait(10)


def chromium(profile: Path) -> Any:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser or not os.access(CHROMEDRIVER, os.X_OK):
        raise SystemExit("needs Chromium and chromedriver (apt-get install chromium "
                         "chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--force-device-scale-factor=1",
                 f"--window-size={WIDTH},800", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def shown(driver: Any, element_id: str) -> None:
    """Wait until the page's script has filled ``element_id`` in."""
    WebDriverWait(driver, 10, poll_frequency=0.05).until(lambda d: d.execute_script(
        "var e = document.getElementById(arguments[0]);"
        "return e && !e.hidden && e.textContent.trim() !== '' && !e.closest('[hidden]')",
        element_id))


def photograph(driver: Any, path: Path, height: int | None = None) -> None:
    """The whole page (or its top ``height`` pixels), as a small palette PNG."""
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, 800)
    inner = driver.execute_script("return window.innerHeight")
    driver.set_window_size(WIDTH, 800 + min(full, height or full) - inner)
    image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
    image = image.quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    image.save(path, optimize=True)
    print(f"{path} {image.width}x{image.height} {path.stat().st_size // 1024} KiB")


def label_by_api(address: str, count: int) -> None:
    """Label the first ``count`` records with 4 through the API, as a script may."""
    base, token = address.split("/?token=")
    for _ in range(count):
        with urllib.request.urlopen(f"{base}/api/next?token={token}") as answer:
            record = json.loads(answer.read())
        body = json.dumps({"id": record["id"], "metric": METRIC, "label": 4}).encode()
        urllib.request.urlopen(urllib.request.Request(f"{base}/api/label?token={token}",
                                                      data=body, method="POST")).close()


def shoot(out: Path, work: Path) -> None:
    run = score_demo(work / "judged")
    driver = chromium(work / "profile")
    try:
        labels = work / "labels.jsonl"
        with annotate(run, labels) as address:
            label_by_api(address, 2)  # a page in progress: labelled 2, left 6
            driver.get(address)
            shown(driver, "record-id")
            ActionChains(driver).send_keys("4").perform()  # the message line, as after a key
            shown(driver, "message")
            photograph(driver, out / "annotate-blind.png")
        with annotate(run, work / "judge-shown.jsonl", "--show-judge") as address:
            driver.get(address)
            shown(driver, "judge-reasoning")
            photograph(driver, out / "annotate-show-judge.png")
        with annotate(run, labels) as address:
            label_by_api(address, 5)
            driver.get(address)
            shown(driver, "done")
            photograph(driver, out / "annotate-done.png", height=260)
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        shoot(args.out, Path(work))


if __name__ == "__main__":
    main()
