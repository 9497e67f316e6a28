"""Fixtures of the system tests: one headless Chromium per module that asks for `driver`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Skipped, saying what to install, without Chromium, chromedriver or selenium."""
    from browser import WAIT_SECONDS, find_executable  # it needs selenium: skips without

    chromium = find_executable("chromium", "chromium-browser", "google-chrome")
    chromedriver = find_executable("chromedriver")
    if chromium is None or chromedriver is None:
        pytest.skip(
            "headless Chromium is needed for the dashboard test: install the Debian packages "
            f"chromium and chromium-driver (found chromium={chromium}, "
            f"chromedriver={chromedriver})"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(options=options, service=Service(chromedriver))
    chrome.set_page_load_timeout(WAIT_SECONDS)
    try:
        yield chrome
    finally:
        chrome.quit()
