"""A log row keeps each of a report's lists bounded: a request of thousands of messages over the
budget makes a pruning decision per message, and its row (redacted on the event loop, stored,
shown) held them all: 2.2 MB for 20,000 messages, 174 ms of the loop. The row keeps the first
``MAX_LISTED`` of each list and how many more there were; counts (the log line, ``/ui``) are
of all of them."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx
import orjson

from proxy.app import create_app
from rules.report import MAX_LISTED, Report, bounded_report, listed_count
from tests.conftest import proxy_settings
from tests.support.edge_upstream import EdgeUpstream

MESSAGES = 1_500


def test_a_report_within_the_bound_is_kept_as_it_is() -> None:
    report: Report = {"session": "s", "pruning": [{"index": i} for i in range(MAX_LISTED)]}  # type: ignore[typeddict-item]
    assert bounded_report(report) is report
    assert listed_count(report, "pruning") == MAX_LISTED


def test_each_long_list_keeps_its_first_items_and_counts_the_rest() -> None:
    report: dict[str, Any] = {
        "session": "s",
        "pruning": [{"index": i} for i in range(MAX_LISTED * 3)],
        "repairs": [{"kind": "k"}] * (MAX_LISTED + 1),
        "warnings": [{"w": 1}],
        "entities": [{"e": 1}] * MAX_LISTED,
        "entities_more": 7,  # bounded by its rule already
    }
    out: dict[str, Any] = bounded_report(report)  # type: ignore[arg-type,assignment]
    assert out["pruning"] == [{"index": i} for i in range(MAX_LISTED)]
    assert out["pruning_more"] == MAX_LISTED * 2
    assert len(out["repairs"]) == MAX_LISTED and out["repairs_more"] == 1
    assert out["warnings"] == [{"w": 1}] and "warnings_more" not in out
    assert out["entities_more"] == 7
    assert len(report["pruning"]) == MAX_LISTED * 3  # the rules' report is not changed
    for key, n in (("pruning", MAX_LISTED * 3), ("repairs", MAX_LISTED + 1), ("entities", 207)):
        assert listed_count(out, key) == n


async def test_a_request_pruned_message_by_message_has_a_bounded_row(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    settings = proxy_settings(
        edge.base_url, pipeline={"on_rule_error": "fail", "budget_tokens": 2_000}
    )
    app = create_app(settings, db_path=str(tmp_path / "p.db"), strict=True)
    app.state.log_stream = stream = io.StringIO()
    messages = [{"role": "user", "content": f"{i} " + "word " * 60} for i in range(MESSAGES)]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            answer = await client.post(
                "/v1/chat/completions",
                json={"model": "gpt-4o", "messages": messages},
                headers={"x-session-id": "many"},
            )
            assert answer.status_code == 200, answer.text[:300]
            store = app.state.services.store
            await store.flush()
            row = await store.get_request(answer.headers["x-ctxproxy-request-id"])
            page = await client.get(f"/ui/requests/{row['id']}")
    report = row["report"]
    pruned = listed_count(report, "pruning")
    assert pruned > MAX_LISTED * 2  # a decision per message dropped
    assert len(report["pruning"]) == MAX_LISTED
    assert report["pruning_more"] == pruned - MAX_LISTED
    assert len(orjson.dumps(report)) < 100_000
    line = orjson.loads(stream.getvalue().splitlines()[-1])
    assert line["pruned"] == pruned  # the log line counts them all
    assert page.status_code == 200
    assert f"Pruning decisions (the first {MAX_LISTED} of {pruned:,})" in page.text
