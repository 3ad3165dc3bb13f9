"""`harness report`: a self-contained, escaped, deterministic page, also in a real browser."""

from __future__ import annotations

import html
import os
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import Sample, calc_patch, completed_demo, err, ok, scripted, subtask

CSP = "default-src 'none'; style-src 'unsafe-inline'"
# Closes the elements a page might wrap text in, opens a script, an image with a handler,
# and breaks out of a double-quoted attribute.
PAYLOAD = (
    '</textarea></pre></code><script>document.title="pwned"</script>'
    '<img src=x onerror="document.title=1">" onmouseover="alert(1)" x="'
)
TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "h5", "section",
    "p", "ul", "li", "dl", "dt", "dd", "table", "thead", "tbody", "tr", "th", "td", "div",
    "span", "code", "pre", "details", "summary", "footer",
}  # fmt: skip


class Page(HTMLParser):
    """Every tag with its attributes, and the text as a browser would show it."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def sections(self) -> list[str]:
        return [str(a["data-subtask"]) for _, a in self.tags if "data-subtask" in a]


def repository(where: Path) -> Sample:
    """The demo repository with its worker answering from a script the test writes."""
    made = scripted(where)
    made.commit_all("script the worker")
    return made


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The demo task run to completion."""
    return completed_demo(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """T1 lands a patch and a note carrying the payload, T2 fails with it, T3 never starts."""
    made = repository(tmp_path_factory.mktemp("hostile"))
    made.write_plan([subtask("T1"), subtask("T2"), subtask("T3")])
    made.commit_all("plan")
    first = ok("T1", ("src/calc.py", calc_patch(f"X = '{PAYLOAD}'")))
    first["result"]["notes"] = [PAYLOAD]
    first["result"]["metrics"] = {"cost_usd": 0.25, "tokens": 1234, "turns": 3}
    made.write_script([first, err("T2", "hard", PAYLOAD)])
    res = made.cli("run", "demo")
    assert res.returncode == 1, res.stderr
    return made


def report(sample: Sample, out: Path) -> str:
    res = sample.cli("report", "demo", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"wrote {out}\n"
    return out.read_text("utf-8")


# -- content ---------------------------------------------------------------------------------


def test_every_subtask_has_a_section_and_a_timeline_row(ran: Sample, tmp_path: Path) -> None:
    text = report(ran, tmp_path / "r.html")
    page = Page(text)
    assert page.sections() == ["T1", "T2", "T3"]
    assert ("section", {"id": "audit", "class": "audit clean", "data-audit": "clean"}) in page.tags
    shown = "".join(page.text)
    assert "Subtasks done3/3" in shown and "Events23" in shown
    commits = [e["details"]["commit"] for e in ran.events() if e["event"] == "step_completed"]
    calls = [e["details"]["call_id"] for e in ran.events() if e["event"] == "subagent_invoked"]
    assert all(c in shown for c in commits + calls)
    assert shown.count("+def subtract(a, b):") == 1  # the diff, as text
    assert "unittest discover" in shown and "run 2: exit 0" in shown  # test evidence


def test_page_is_self_contained(ran: Sample, tmp_path: Path) -> None:
    text = report(ran, tmp_path / "r.html")
    page = Page(text)
    metas = [a for tag, a in page.tags if tag == "meta"]
    assert {"http-equiv": "Content-Security-Policy", "content": CSP} in metas
    linking = {"src", "href", "action", "formaction", "srcset", "poster", "data", "background"}
    assert not [(t, a) for t, a in page.tags if linking & set(a)]
    assert not [t for t, _ in page.tags if t in ("script", "link", "iframe", "object", "img")]
    assert "url(" not in text and "@import" not in text


def test_hostile_text_shows_as_text_and_never_as_markup(hostile: Sample, tmp_path: Path) -> None:
    text = report(hostile, tmp_path / "r.html")
    page = Page(text)
    assert {tag for tag, _ in page.tags} <= TAGS
    handlers = [(t, k) for t, a in page.tags for k in a if k.startswith("on")]
    assert handlers == []
    assert "<script" not in text.lower() and "</textarea>" not in text
    assert '" onmouseover="' not in text
    escaped = html.escape(PAYLOAD, quote=True)
    shown = "".join(page.text)
    # The patch line, the note, the attempt's error, the blocker and the log's error.
    assert text.count(escaped) >= 5
    assert shown.count(PAYLOAD) >= 5
    assert f"+X = '{PAYLOAD}'" in shown
    assert page.sections() == ["T1", "T2", "T3"]


def test_a_blocked_task_renders_its_failure(hostile: Sample, tmp_path: Path) -> None:
    text = report(hostile, tmp_path / "r.html")
    shown = "".join(Page(text).text)
    assert "Subtasks done1/3" in shown and "Tasknot complete" in shown
    assert f"Blocked at T2: {PAYLOAD}" in shown
    t2 = text[text.index('data-subtask="T2"') : text.index('data-subtask="T3"')]
    assert '<span class="status-blocked">blocked</span>' in t2
    assert "failed (subagent_failed)" in t2
    t3 = text[text.index('data-subtask="T3"') :]
    assert "Not started." in t3 and "pending" in t3
    assert "Total cost$0.2500" in shown and "Tokens used1234" in shown and "Turns3" in shown
    assert "cost_usd 0.25, tokens 1234, turns 3" in shown


def test_a_broken_log_is_reported_by_the_audit(hostile: Sample, tmp_path: Path) -> None:
    copy = Sample(tmp_path / "copy", hostile.script)
    shutil.copytree(hostile.root, copy.root, symlinks=True)
    log = copy.root / "ai/tasks/demo/progress.ndjson"
    lines = log.read_bytes().splitlines()
    forged = orjson.loads(lines[1])
    forged["error"] = PAYLOAD
    lines[1] = orjson.dumps(forged, option=orjson.OPT_SORT_KEYS)
    log.write_bytes(b"\n".join(lines) + b"\n")
    text = report(copy, tmp_path / "r.html")
    page = Page(text)
    banner = next(a for t, a in page.tags if a.get("id") == "audit")
    assert banner["data-audit"] == "findings"
    assert "<li>seq " in text
    assert page.sections() == ["T1", "T2", "T3"]


def test_same_record_same_bytes_wherever_it_lies(hostile: Sample, tmp_path: Path) -> None:
    first = report(hostile, tmp_path / "a.html").encode()
    again = report(hostile, tmp_path / "b.html").encode()
    assert first == again
    copy = Sample(tmp_path / "elsewhere" / "repo", hostile.script)
    shutil.copytree(hostile.root, copy.root, symlinks=True)
    assert report(copy, tmp_path / "c.html").encode() == first
    res = hostile.cli("report", "demo")
    assert res.returncode == 0 and res.stdout.encode() == first


def test_cli_refuses_an_unknown_task_and_writes_nothing(ran: Sample, tmp_path: Path) -> None:
    out = tmp_path / "out.html"
    res = ran.cli("report", "nosuch", "-o", str(out))
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["harness: ai/tasks/nosuch/plan.json: file not found"]
    assert not out.exists() and list(tmp_path.iterdir()) == []
    out.write_text("kept")
    assert ran.cli("report", "nosuch", "-o", str(out)).returncode == 2
    assert out.read_text() == "kept"
    report(ran, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.html"]


@pytest.mark.parametrize("kind", ["folder", "empty", "symlink", "fifo", "under /proc"])
def test_an_output_that_is_no_regular_file_is_refused_and_left_as_it_was(
    ran: Sample, tmp_path: Path, kind: str
) -> None:
    """The page is written aside and renamed over -o: over a folder that failed with a
    traceback, and over a device or a link it would replace the thing itself (as root,
    -o /dev/null made /dev/null a regular file)."""
    target = tmp_path / "elsewhere.html"
    target.write_text("kept")
    out = {"folder": tmp_path / "out", "empty": "", "under /proc": "/proc/self/nosuch/x.html"}
    path = tmp_path / "out"
    if kind == "folder":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    before = sorted(p.name for p in tmp_path.iterdir())
    res = ran.cli("report", "demo", "-o", str(out.get(kind, path)))
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.splitlines()
    assert line.startswith("harness: --output ") and line.endswith(
        "No such file or directory" if kind == "under /proc" else ": not a regular file"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert target.read_text() == "kept"
    if kind == "folder":
        assert list(path.iterdir()) == []
    report(ran, target)  # the twin: a regular file is written over
    assert target.read_text() != "kept"


# -- in a real browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium through chromedriver; skipped when missing unless CI requires it."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    found = {"chromium": chromium, "chromedriver": chromedriver}
    missing = [name for name, path in found.items() if path is None]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium")
    if missing:
        why = (
            f"headless browser test needs {', '.join(missing)} "
            "(apt-get install chromium chromium-driver; pip install selenium)"
        )
        if os.environ.get("HARNESS_REQUIRE_BROWSER") == "1":
            pytest.fail(f"HARNESS_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    profile = tmp_path_factory.mktemp("chromium-profile")
    # Without the background-networking flags Chromium keeps dialling out from a sandbox.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(chromedriver)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def load(browser: Any, page: Path) -> list[dict[str, Any]]:
    """Open the page; the console's SEVERE entries (errors, CSP refusals) it caused."""
    browser.get_log("browser")  # drop what an earlier page left
    browser.get(page.as_uri())
    browser.find_element("id", "audit")
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def test_browser_shows_every_subtask_without_console_errors(
    browser: Any, ran: Sample, tmp_path: Path
) -> None:
    out = tmp_path / "r.html"
    report(ran, out)
    assert load(browser, out) == []
    assert browser.title == "harness report: demo"
    banner = browser.find_element("id", "audit")
    assert banner.is_displayed() and "Audit: clean" in banner.text
    for sid in ("T1", "T2", "T3"):
        section = browser.find_element("css selector", f'section[data-subtask="{sid}"]')
        assert section.is_displayed(), sid
    rows = browser.find_elements("css selector", "#timeline tbody tr")
    assert [r.find_element("css selector", "td").text for r in rows] == ["T1", "T2", "T3"]


def test_browser_runs_none_of_the_hostile_text(
    browser: Any, hostile: Sample, tmp_path: Path
) -> None:
    out = tmp_path / "r.html"
    report(hostile, out)
    assert load(browser, out) == []
    assert browser.title == "harness report: demo"  # the payload would have changed it
    assert browser.find_elements("css selector", "script, img, textarea, [onmouseover]") == []
    t1 = browser.find_element("css selector", 'section[data-subtask="T1"]')
    assert t1.is_displayed()
    assert PAYLOAD in t1.text
    blocker = browser.find_element("id", "blocker")
    assert blocker.is_displayed() and blocker.text == f"Blocked at T2: {PAYLOAD}"
