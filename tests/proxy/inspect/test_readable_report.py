"""The rules' report reads as text in ``show`` and on ``/ui``: the working set as its goal,
instruction, files, diagnostics, plan and next target (never ``goal True``); each reference as
``"mention" → entity path (confidence, via session)`` (never raw JSON); the entities a
reference points to are listed on the request that points (its new entities apart); and the
request page fits a 1400-px window in a real browser."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from proxy.inspect import report_view as rv
from proxy.inspect.show import render
from tests.support.factories import assistant, request, result, shell, system, user

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
SESSION = "readable"
GOAL = "Fix the failing login test in app/auth.py"


def _history() -> list[dict[str, Any]]:
    failing = (
        "app/tests/test_login.py:12: AssertionError\n"
        "FAILED app/tests/test_login.py::test_login - AssertionError: 401 != 200\n"
        "=========== 1 failed in 0.12s ===========\n"
    )
    return [
        system("You are a coding agent."),
        user(GOAL),
        assistant(None, shell("c1", "pytest -q app/tests/test_login.py")),
        result("c1", failing),
        assistant(None, shell("c2", "mkdir -p build/reports")),
        result("c2", ""),
        assistant("Created build/reports."),
    ]


def serve_two_turns(proxy: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The folder is created in the first request; the second points at it."""
    headers = {"x-session-id": SESSION}
    url = proxy.base_url + "/chat/completions"
    first = httpx.post(url, json=request(*_history(), user("ok")), headers=headers)
    second_body = request(*_history(), user("ok"), assistant("Done."))
    second_body["messages"].append(user("now put the test report in the folder you just created"))
    second = httpx.post(url, json=second_body, headers=headers)
    assert first.status_code == second.status_code == 200
    rows = (proxy.row(r.headers["x-ctxproxy-request-id"]) for r in (first, second))
    return next(rows), next(rows)


@pytest.fixture
def pointing(live_proxy, fake_upstream) -> Iterator[tuple[Any, dict[str, Any]]]:  # type: ignore[no-untyped-def]
    proxy = live_proxy(store={"capture_payloads": True})
    _, row = serve_two_turns(proxy)
    report = row["report"]
    # what the page must make readable, as today's rules report it
    assert report["references"] and report["references"][0]["entity"]["path"]
    assert report["entities"] == []  # the folder was new in the first request, not this one
    yield proxy, row


def test_show_reads_the_working_set_and_references_as_text(pointing) -> None:  # type: ignore[no-untyped-def]
    _, row = pointing
    out = io.StringIO()
    render(row, Console(file=out, width=120, color_system=None))
    text = out.getvalue()
    path = row["report"]["references"][0]["entity"]["path"]
    assert GOAL in text and "True" not in text
    assert "now put the test report in the folder you just created" in text  # the instruction
    assert re.search(r"Open diagnostics\s+│ pytest app/tests/test_login.py:12", text)
    assert "Next repair target" in text and "app/tests/test_login.py:12" in text
    assert re.search(rf'"the folder you just created" → {re.escape(path)} \(folder', text)
    assert "confidence " in text and "via this session" in text
    assert "Entities the references point to (1)" in text and path in text
    assert "New entities (this request's tool calls): none" in text
    assert '{"' not in text.split("Resolved references")[1].split("Working set")[0]


def test_ui_request_page_reads_as_text(pointing) -> None:  # type: ignore[no-untyped-def]
    proxy, row = pointing
    page = httpx.get(f"{proxy.url}/ui/requests/{row['id']}").text
    refs = page.split('id="references"')[1].split("</section>")[0]
    path = row["report"]["references"][0]["entity"]["path"]
    assert "&#34;the folder you just created&#34; → " + path in refs
    assert "{&#34;" not in refs and "confidence" in refs  # text, not JSON
    ws = page.split('id="working-set"')[1].split("</table>")[0]
    assert GOAL in ws and "True" not in ws and "Latest instruction" in ws
    assert "<th>Open diagnostics</th>" in ws and "app/tests/test_login.py:12" in ws
    referenced = page.split('id="entities-referenced"')[1].split("</section>")[0]
    assert "Entities the references point to" in referenced and path in referenced
    assert "(1)" in referenced
    assert "New entities (this request&#39;s tool calls)" in page


def test_working_set_lines_of_an_older_row_say_the_text_was_not_logged() -> None:
    report = {"working_set": {"goal": True, "instruction": False, "changed_files": ["a.py"]}}
    lines = dict(rv.working_set_lines(report))
    assert lines["Goal"][0].startswith("set (its text is not in this log row")
    assert "Latest instruction" not in lines and lines["Changed files"] == ["a.py"]


def test_references_read_in_each_shape() -> None:
    resolved = {
        "mention": "the config the lead set up",
        "confidence": 0.78,
        "chain": [
            {"session": "alice/sub", "depth": 0, "candidates": 0},
            {"session": "alice/lead", "depth": 1, "candidates": 1},
        ],
        "entity": {"type": "file", "name": "cfg.yaml", "path": "/w/cfg.yaml", "action": "created"},
    }
    assert rv.reference_text(resolved) == (
        '"the config the lead set up" → /w/cfg.yaml '
        "(file created; confidence 0.78; via parent session alice/lead)"
    )
    abstained = {"mention": "it", "confidence": 0.4, "entity": None, "abstained": "ambiguous"}
    abstained["candidates"] = ["/a", "/b"]
    assert (
        rv.reference_text(abstained)
        == '"it" → no entity (ambiguous: candidates /a, /b; confidence 0.4)'
    )
    legacy = {"mention": "the folder", "entity": "/work/fixes", "confidence": 0.92}
    assert rv.reference_text(legacy) == '"the folder" → /work/fixes (confidence 0.92)'


@pytest.mark.browser
def test_request_page_fits_1400_px_in_chromium(pointing) -> None:  # type: ignore[no-untyped-def]
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium not installed at /usr/bin/chromium (bin/test installs it)")
    from playwright.sync_api import sync_playwright

    proxy, row = pointing
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--headless", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{proxy.url}/ui/requests/{row['id']}")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "ui-request-readable.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1400
            refs = page.locator("#references li").all_inner_texts()
            assert len(refs) == 1 and refs[0].startswith('"the folder you just created" → ')
            ws = page.locator("#working-set").inner_text()
            assert GOAL in ws and "True" not in ws
        finally:
            browser.close()
