"""The HTML report and the site in a real headless Chromium (Debian's, driven by Selenium over chromedriver):
each page loads with no console error, every chart draws (SVG with marks in it), the index's links open
pages that draw too, and clicking a legend entry hides that run. Screenshots land in the test's tmp folder.

The demo bundle's report is checked in tests/test_demo.py, on the bundle `make demo` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers_browser import Page, browser, chromium_paths
from tests.test_bundle import repro
from tests.test_html_report import PUBLISHED, bundle_with_a_deviation  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow

VISIBLE_JS = ("return document.getElementById(arguments[0]).data"
              ".map(function (t) { return t.visible === undefined ? true : t.visible; });")


def click_legend(chrome, chart: str, name: str) -> list:
    """A real mouse click on the legend entry named `name`; the traces' visibility once Plotly has redrawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    before = chrome.driver.execute_script(VISIBLE_JS, chart)
    for entry in chrome.driver.find_elements(By.CSS_SELECTOR, f"#{chart} .legend .traces"):
        if entry.find_element(By.CSS_SELECTOR, ".legendtext").text == name:
            entry.find_element(By.CSS_SELECTOR, ".legendtoggle").click()
            break
    else:
        raise AssertionError(f"no legend entry {name!r} in {chart}")
    # Plotly waits out its double-click delay before it hides anything
    WebDriverWait(chrome.driver, 10).until(lambda d: d.execute_script(VISIBLE_JS, chart) != before)
    return chrome.driver.execute_script(VISIBLE_JS, chart)


@pytest.fixture(scope="module")
def chrome():
    chromium_paths()
    with browser() as b:
        yield b


def assert_drawn(page: Page, charts: int) -> None:
    assert page.console_errors == (), page.console_errors
    assert len(page.charts) == charts, page.charts
    for chart in page.charts:
        assert chart["svg"] > 0 and chart["marks"] > 0, chart  # drawn, not an empty frame


def no_network(page: Page) -> None:
    assert all(not u.startswith(("http://", "https://")) for u in page.resources), page.resources


def test_bundle_report_in_the_browser(chrome, bundle_with_a_deviation, tmp_path):  # noqa: F811
    result = repro("report", "--html", bundle_with_a_deviation, "--out", tmp_path, "--record-logs", PUBLISHED)
    assert result.returncode == 0, result.stderr
    page = chrome.open(tmp_path / "report.html")
    assert_drawn(page, 3)
    no_network(page)
    assert chrome.driver.execute_script("return typeof Plotly") == "object"  # from the inlined copy
    # toggling a run: a click on its legend entry hides it (Plotly's "legendonly")
    before = chrome.driver.execute_script(VISIBLE_JS, "chart-loss-step")
    assert before == [True] * 7
    after = click_legend(chrome, "chart-loss-step", "20261129T110500Z-bbbb")
    assert after == [True] * 5 + ["legendonly", True]  # that run alone
    after = click_legend(chrome, "chart-loss-step", "b067b4ac")  # one of the record's: its whole group
    assert after == ["legendonly"] * 4 + [True, "legendonly", True]
    shot = chrome.screenshot(tmp_path / "bundle-report.png")
    assert shot.stat().st_size > 50_000


def test_site_in_the_browser_every_index_link_resolves(chrome, tmp_path):
    result = repro("records", "site", "--out", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    index = chrome.open(tmp_path / "site" / "index.html")
    assert_drawn(index, 1)
    no_network(index)
    chrome.screenshot(tmp_path / "site-index.png")
    local = sorted({u for u in index.links if u.startswith("file://")})  # records and parents
    assert local == sorted(p.as_uri() for p in (tmp_path / "site" / "records").glob("*.html")) and len(local) > 10
    for url in local:
        path = Path(url.removeprefix("file://"))
        assert path.is_file(), url
        page = chrome.open(path)
        assert_drawn(page, 1)
        assert page.title.endswith(": speedrun record")
        assert (tmp_path / "site" / "index.html").as_uri() in page.links  # and back to the index


# Every word of the index table's text on one line: a word whose boxes sit on two lines was broken inside it.
# Record names are several text nodes (a <wbr> after each `_`), so a break there is between words.
SPLIT_WORDS_JS = """
var out = [], walker = document.createTreeWalker(document.querySelector('table'), NodeFilter.SHOW_TEXT), node;
while ((node = walker.nextNode())) {
  var re = /\\S+/g, m;
  while ((m = re.exec(node.data))) {
    var range = document.createRange();
    range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
    var tops = new Set(Array.from(range.getClientRects()).filter(function (r) { return r.width > 0; })
                       .map(function (r) { return Math.round(r.top); }));
    if (tops.size > 1) out.push(m[0]);
  }
}
return out;"""
FITS_JS = ("var t = document.querySelector('table');"
           "return [t.getBoundingClientRect().right, document.documentElement.clientWidth];")
TRACES_JS = ("return document.getElementById('chart-history').data"
             ".map(function (t) { return [t.name, t.x.length]; });")


def test_site_index_reads_at_1280_px_and_charts_both_tracks(chrome, tmp_path):
    result = repro("records", "site", "--out", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    chrome.driver.set_window_size(1280, 900)
    index = chrome.open(tmp_path / "site" / "index.html")
    assert_drawn(index, 1)
    right, width = chrome.driver.execute_script(FITS_JS)
    assert right <= width, (right, width)  # the table fits the window: nothing to scroll sideways
    assert chrome.driver.execute_script(SPLIT_WORDS_JS) == []
    traces = dict(chrome.driver.execute_script(TRACES_JS))
    assert traces["track 1 (GPT-2 small, 3.28): claimed time"] > 10
    assert traces["track 2 (GPT-2 medium, 2.92): claimed time"] >= 2
    page = chrome.open(tmp_path / "site" / "records" / "2025-07-13_UpgradeTorch190.html")
    assert_drawn(page, 1)
    words = chrome.driver.find_element("css selector", "blockquote.upstream").text
    assert words.startswith("For submissions which improve speed by optimizing the systems performance")


def test_an_interrupted_then_resumed_bundle_shows_its_aborted_attempt(chrome, tmp_path):
    """Issue 37: the attempt Ctrl-C ended is on the page a reader sees (verdict and runs), not only in the
    collapsed member list."""
    from selenium.webdriver.common.by import By

    from tests.test_html_attempts import ABORTED, bundle_with_an_aborted_attempt

    bundle = bundle_with_an_aborted_attempt(tmp_path / "made")
    result = repro("report", "--html", bundle, "--out", tmp_path, "--record-logs", PUBLISHED)
    assert result.returncode == 0, result.stderr
    page = chrome.open(tmp_path / "report.html")
    assert_drawn(page, 3)
    verdict = chrome.driver.find_element(By.ID, "attempts")
    assert verdict.is_displayed() and ABORTED in verdict.text and "aborted" in verdict.text
    rows = [row.text for row in chrome.driver.find_elements(By.CSS_SELECTOR, "tr.attempt") if row.is_displayed()]
    assert len(rows) == 1 and ABORTED in rows[0] and "aborted (exit 130)" in rows[0], rows
