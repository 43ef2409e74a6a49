"""The labelling page in a real browser: headless Chromium, driven by Selenium through Debian's
chromedriver, labels five records by keyboard from a ``rageval annotate`` process, undoes one,
reloads and continues; the labels file holds exactly that, the page showed the rubric and no
judge score, a wrong token is refused and the browser's console stays empty (a blocked script
or a Content-Security-Policy violation would be logged there)."""

from __future__ import annotations

import os
import shutil
import signal
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from annotate_helpers import FAITH, ROOT, Annotator, label_lines, write_judged_run

pytestmark = pytest.mark.browser

CHROMEDRIVER = "/usr/bin/chromedriver"
# Judge scores that appear nowhere else on the page, so that a leak would be seen.
SCORES = {f"r{i:02d}": 1.25 + i / 100 for i in range(8)}
RUBRIC = tomllib.loads((ROOT / "prompts" / "faithfulness.toml").read_text(encoding="utf-8"))
WAIT_S = 10


def _missing(message: str) -> None:
    if os.environ.get("CI") == "true":  # CI installs them: a missing browser is a failure there
        pytest.fail(message)
    pytest.skip(message)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    _missing("the browser test needs Chromium (Debian: apt-get install chromium)")
    raise AssertionError("unreachable")


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium under Debian's chromedriver, its console captured; Selenium Manager
    is never asked (both paths are given), so nothing is downloaded."""
    browser = _chromium()
    if not os.access(CHROMEDRIVER, os.X_OK):
        _missing(f"the browser test needs {CHROMEDRIVER} (Debian: apt-get install "
                 "chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1200,900", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield chrome
    finally:
        chrome.quit()


@pytest.fixture
def annotator(tmp_path: Path) -> Iterator[Annotator]:
    run = write_judged_run(tmp_path / "r", SCORES)
    served = Annotator(run, tmp_path / "labels.jsonl", "ana")
    try:
        yield served
    finally:
        served.stop(signal.SIGTERM)


def _wait(driver: Any, condition: Callable[[], Any], what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.05).until(
        lambda _: condition(), message=f"the page did not show {what}")


def _text(driver: Any, element_id: str) -> str:
    return driver.execute_script("return document.getElementById(arguments[0]).textContent",
                                 element_id)


def _displayed(driver: Any, element_id: str) -> bool:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).is_displayed()


def _press(driver: Any, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def _shown_record(driver: Any, after: str = "") -> str:
    """The id of the record the page shows, once it is another than ``after``."""
    return _wait(driver, lambda: (_text(driver, "record-id") or None)
                 if _text(driver, "record-id") != after else None, "the next record")


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def test_labelling_by_keyboard_in_chromium(driver: Any, annotator: Annotator,
                                           tmp_path: Path) -> None:
    driver.get(f"{annotator.base}?token={annotator.token}")
    shown = _shown_record(driver)

    # The rubric beside the record, and nothing of the judge's (blind by default).
    assert _text(driver, "criterion") == RUBRIC["description"]
    buttons = driver.execute_script(
        "return Array.from(document.querySelectorAll('#scale button'), b => b.textContent)")
    assert [text.split(" ", 1)[0] for text in buttons] == ["1", "2", "3", "4", "5"]
    assert buttons[0].split(" ", 1)[1] == RUBRIC["anchors"]["1"]
    assert driver.execute_script("return document.getElementById('judge-block').hidden")
    dom = driver.page_source
    assert "the judge's reason" not in dom
    assert not [score for score in SCORES.values() if str(score) in dom]
    assert _text(driver, "annotator") == "ana"

    # Five labels by number keys, then `u` takes the last one back and shows it again.
    labelled = []
    for key in "12345":
        labelled.append((shown, int(key)))
        _press(driver, key)
        shown = _shown_record(driver, after=shown)
    assert len({rid for rid, _ in labelled}) == 5
    _press(driver, "u")
    last = labelled[-1][0]
    _wait(driver, lambda: _text(driver, "message") == f"took back the label of {last}",
          "the undo")
    _wait(driver, lambda: _text(driver, "record-id") == last, "the record taken back")
    assert _text(driver, "progress").startswith("labelled 4 · left 4 of 8")

    # A reload resumes at the record the undo gave back; label it anew.
    driver.refresh()
    assert _shown_record(driver) == last
    _press(driver, "2")
    shown = _shown_record(driver, after=last)
    _wait(driver, lambda: _text(driver, "progress").startswith("labelled 5 · left 3"),
          "the progress after the relabel")

    # The last three, then the done screen alone: no empty record beside it.
    for _ in range(2):
        _press(driver, "3")
        shown = _shown_record(driver, after=shown)
    _press(driver, "3")
    _wait(driver, lambda: _displayed(driver, "done"), "the done screen")
    assert not _displayed(driver, "main")
    assert _text(driver, "progress").startswith("labelled 8 · left 0 of 8")

    lines = label_lines(tmp_path / "labels.jsonl")
    assert [(line["id"], line["label"], line.get("undo", False)) for line in lines[:7]] == [
        *((rid, value, False) for rid, value in labelled),
        (last, None, True), (last, 2, False)]
    assert [line["label"] for line in lines[7:]] == [3, 3, 3]
    assert {line["id"] for line in lines} == set(SCORES)
    assert all(line["annotator"] == "ana" and line["metric"] == FAITH
               and line["shown_judge"] is False for line in lines)

    # Only the token opens the page.
    assert _status(f"{annotator.base}?token=wrong") == 403
    assert _status(annotator.base) == 403
    assert _status(f"{annotator.base}?token={annotator.token}") == 200

    # No console message at all, and the capture works (a page's error is caught).
    assert driver.get_log("browser") == []
    driver.execute_script("console.error('canary')")
    assert any("canary" in entry["message"] for entry in driver.get_log("browser"))
