"""A real headless Chromium (Debian's `chromium` and `chromium-driver`, tests/ci/chromium.sh) driven by Selenium.

    with browser() as b:
        page = b.open(path)          # file:// URL; waits until every chart has drawn or fails
        page.console_errors, page.charts, page.resources, page.links
        b.screenshot(tmp_path / "report.png")

Without Chromium the tests skip, except in CI (REPRO_REQUIRE_BROWSER=1), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

# Per `.chart`: drawn traces (SVG paths of lines and bars, points) and whether the plot's SVG is there.
CHARTS_JS = """
return Array.from(document.querySelectorAll('.chart')).map(function (el) {
  return {id: el.id, svg: el.querySelectorAll('svg.main-svg').length,
          marks: el.querySelectorAll('.scatterlayer path.js-line, .scatterlayer path.point, .barlayer path').length,
          legend: el.querySelectorAll('.legend .traces').length};
});
"""
RESOURCES_JS = "return performance.getEntriesByType('resource').map(function (e) { return e.name; });"
LINKS_JS = "return Array.from(document.querySelectorAll('a[href]')).map(function (a) { return a.href; });"
READY_JS = """
var charts = document.querySelectorAll('.chart');
return document.readyState === 'complete' &&
  Array.from(charts).every(function (el) { return el.querySelector('svg.main-svg') !== null; });
"""


def chromium_paths() -> tuple[str, str]:
    found = shutil.which("chromium"), shutil.which("chromedriver")
    if None in found:
        if os.environ.get("REPRO_REQUIRE_BROWSER") == "1":
            pytest.fail("no chromium/chromedriver although REPRO_REQUIRE_BROWSER=1 (`make chromium` installs them)")
        pytest.skip("no chromium/chromedriver here; `make chromium` installs Debian's (root)")
    return found


@dataclass(frozen=True)
class Page:
    url: str
    title: str
    console_errors: tuple[str, ...]
    charts: tuple[dict, ...]
    resources: tuple[str, ...]  # every URL the page loaded after itself
    links: tuple[str, ...]


class Browser:
    def __init__(self, driver):
        self.driver = driver

    def open(self, path: Path, timeout: float = 60) -> Page:
        from selenium.webdriver.support.ui import WebDriverWait

        d = self.driver
        d.get(Path(path).resolve().as_uri())
        WebDriverWait(d, timeout).until(lambda drv: drv.execute_script(READY_JS))
        errors = tuple(e["message"] for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR"))
        return Page(d.current_url, d.title, errors, tuple(d.execute_script(CHARTS_JS)),
                    tuple(d.execute_script(RESOURCES_JS)), tuple(d.execute_script(LINKS_JS)))

    def screenshot(self, path: Path, width: int = 1280) -> Path:
        """The whole page, not only the window: the window is grown to the document's height first."""
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        self.driver.set_window_size(width, min(int(height) + 100, 12000))
        self.driver.save_screenshot(str(path))
        self.driver.set_window_size(width, 900)
        return Path(path)


@contextlib.contextmanager
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    try:
        yield Browser(driver)
    finally:
        driver.quit()
