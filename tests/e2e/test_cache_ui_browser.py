"""The /ui session page's cost line and prompt-cache chart, in headless Chromium (Debian's
package, driven by playwright): a live proxy serves one session whose upstream reports a first
request, a hit, a miss by the client's own change of its system prompt and a miss by expiry
(a 1 s TTL set in ``pricing:``); the page states the session's cost against direct at gpt-4o's
prices and marks each fall with its cause above its bar."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from tests.e2e.test_ui_browser import ARTIFACTS, browser  # noqa: F401 (the fixture)
from tests.support.factories import assistant, request, system, user

SESSION = "cost-ui"
SYSTEM = "You are a careful coding agent. " * 60


def usage(prompt: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": 3,
        "total_tokens": prompt + 3,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def send(proxy: Any, head: str, turns: int) -> str:
    messages = [system(head), user("Fix calc.py.")]
    for i in range(turns):
        messages += [assistant(f"Step {i} done."), user(f"Now step {i + 1}.")]
    r = httpx.post(
        proxy.base_url + "/chat/completions",
        json=request(*messages),
        headers={"x-session-id": SESSION},
    )
    assert r.status_code == 200
    return str(r.headers["x-ctxproxy-request-id"])


@pytest.mark.browser
def test_session_cost_line_and_cache_chart_in_chromium(live_proxy, fake_upstream, browser) -> None:  # noqa: F811
    proxy = live_proxy(pricing=[{"match": ["*"], "ttl_s": 1}])
    script = [
        (SYSTEM, 0, usage(1300, 0)),  # first
        (SYSTEM, 1, usage(1400, 1280)),  # hit
        ("Be terse. " + SYSTEM, 2, usage(1500, 0)),  # the client changed its system prompt
        ("Be terse. " + SYSTEM, 3, usage(1600, 0)),  # after 1.5 s idle: expiry
    ]
    ids = []
    for i, (head, turns, reported) in enumerate(script):
        if i == 3:
            time.sleep(1.5)
        fake_upstream.script.usage = reported
        ids.append(send(proxy, head, turns))
    rows = [proxy.row(i) for i in ids]
    assert [r["cache"].get("cause") for r in rows] == [None, None, "client", "expiry"]
    cost = sum(r["cache"]["usd"] for r in rows)
    direct = sum(r["cache"]["direct_usd"] for r in rows)

    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    page.goto(f"{proxy.url}/ui/sessions/{rows[0]['session_id']}")
    line = page.locator("#cost-line").inner_text()
    assert f"${cost:.4f} against ${direct:.4f} direct" in line
    assert "at gpt-4o's prices over 4 requests" in line
    assert "cache busts: expiry 1, client 1;" in line

    chart = page.locator("#cache-chart")
    bars = chart.locator("g.bar")
    assert bars.count() == 4
    assert [bars.nth(i).get_attribute("data-outcome") for i in range(4)] == [
        "first", "hit", "miss", "miss",
    ]  # fmt: skip
    # the hit's bar is mostly cache, the misses' none: heights in proportion
    hit_cached = float(bars.nth(1).locator("rect.cached").get_attribute("height") or 0)
    hit_full = float(bars.nth(1).locator("rect.uncached").get_attribute("height") or 0)
    assert hit_cached / hit_full == pytest.approx(1280 / 120, rel=0.02)
    assert float(bars.nth(2).locator("rect.cached").get_attribute("height") or 1) == 0
    marks = chart.locator("text.cause")
    assert [(m.get_attribute("data-turn"), m.get_attribute("data-cause")) for m in marks.all()] == [
        ("3", "client"),
        ("4", "expiry"),
    ]
    assert "the client's own change (system)" in (
        marks.nth(0).locator("title").text_content() or ""
    )
    cells = page.locator("#turns tbody tr td.cache").all_inner_texts()
    assert cells[2] == "miss: client (system), re-billed 1400"
    assert re.match(r"miss: expiry, re-billed 1500", cells[3])
    page.screenshot(path=str(ARTIFACTS / "ui-session-cache.png"), full_page=True)

    # the busted request's own page: its cache line, as show prints it
    page.click(f"#turns >> text={rows[2]['id']}")
    said = page.locator("p.cache-line").first.inner_text()
    assert said.startswith("Cache: miss: none of 1500 prompt tokens read from the cache; cause: ")
    assert "the client's own change (system); re-billed 1400 tokens ($" in said
