"""Opens a report in a real browser: Debian's Chromium (/usr/bin/chromium), driven by
playwright's Python package (never a downloaded browser), headless and offline. Returns
what rendered: each plotly chart's DOM, the console's errors, every request the page made,
and a screenshot."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Each chart div: is it a plotly plot, how many .main-svg and drawn traces does it hold.
CHARTS_JS = """() => [...document.querySelectorAll('div[id^="chart-"]')].map(d => ({
  id: d.id,
  plotly: d.classList.contains('js-plotly-plot'),
  svgs: d.querySelectorAll('.main-svg').length,
  traces: d.querySelectorAll('g.trace').length,
}))"""
DRAWN_JS = """() => [...document.querySelectorAll('div[id^="chart-"]')].every(
  d => d.classList.contains('js-plotly-plot') && d.querySelector('.main-svg g.trace'))"""


def unavailable() -> str | None:
    """Why the browser cannot run here (None: it can)."""
    if not Path(CHROMIUM).exists():
        how = "apt-get install -y chromium" if shutil.which("apt-get") else "Debian's chromium"
        return f"{CHROMIUM} is missing (`make test` installs it as root: {how})"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[dev]')"
    return None


# Each chart's traces as plotly holds them: name, x and y.
TRACES_JS = """() => Object.fromEntries([...document.querySelectorAll('div[id^="chart-"]')].map(
  d => [d.id, (d.data || []).map(t => ({name: t.name || '', x: t.x || [], y: t.y || []}))]))"""
SECTIONS_JS = "() => [...document.querySelectorAll('section')].map(s => s.id)"


@dataclass
class Rendered:
    charts: list[dict] = field(default_factory=list)  # CHARTS_JS's answer
    traces: dict[str, list[dict]] = field(default_factory=dict)  # TRACES_JS's answer
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    title: str = ""
    sections: list[str] = field(default_factory=list)  # ids of the page's <section>s


def _load(browser: Any, html: Path, screenshot: Path, width: int, until: str | None) -> Rendered:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    out = Rendered()
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.on("console", lambda m: out.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: out.errors.append(f"uncaught: {exc}"))
    page.on("request", lambda r: out.requests.append(r.url))
    page.goto(html.resolve().as_uri(), wait_until="load")
    try:
        page.wait_for_function(DRAWN_JS, timeout=10_000)
    except PlaywrightTimeout:
        pass  # the caller sees which chart did not draw
    out.charts = page.evaluate(CHARTS_JS)
    out.traces = page.evaluate(TRACES_JS)
    out.title = page.title()
    out.sections = page.evaluate(SECTIONS_JS)
    if until is None:
        page.screenshot(path=str(screenshot), full_page=True)
    else:
        js = f"() => document.getElementById('{until}').getBoundingClientRect().bottom + 16"
        clip = {"x": 0, "y": 0, "width": width, "height": page.evaluate(js)}
        page.screenshot(path=str(screenshot), full_page=True, clip=clip)
    page.close()
    return out


def open_reports(
    pages: list[tuple[Path, Path]], *, width: int = 1280, until: str | None = None
) -> list[Rendered]:
    """Loads each (html, screenshot) page from disk in one headless Chromium, waits until
    every chart is drawn (10 s at most), saves its screenshot (the whole page, or down to
    the end of the section with id `until`) and returns what rendered."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            return [_load(browser, html, shot, width, until) for html, shot in pages]
        finally:
            browser.close()
