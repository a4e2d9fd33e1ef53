"""A compaction's account: its re-bill against what later requests saved by leaving out what it
freed; paid back once they meet, never paid back when the session compacts again first; free on
a cold cache. Driven through the engine (a forced compaction) with fake usage, and as arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.attribution import payback
from proxy.attribution.attribute import Usage
from proxy.rewrite.engine import Engine
from proxy.settings import settings_from_mapping
from proxy.store.sqlite import Store
from rules.base import CacheFacts
from rules.registry import default_rule_names
from tests.proxy.attribution.test_causes import TASK, body, turns
from tests.support.factories import system

FACTS = CacheFacts(read_ratio=0.1, write_ratio=1.0)


@pytest.mark.parametrize(
    ("freed", "bust", "later", "state"),
    [
        (1000, 450.0, [(5000, 4800)] * 3, payback.PENDING),  # 3 × 136 < 450
        (1000, 450.0, [(5000, 4800)] * 3 + [(5000, 0)], payback.PAID_BACK),  # a cold one: +1000
        (1000, 0.0, [], payback.PAID_BACK),  # nothing re-billed: paid at once
    ],
)
def test_the_account_pays_back_once_savings_meet_the_bust(
    freed: int, bust: float, later: list[tuple[int, int]], state: str
) -> None:
    account = payback.open_account("r1", {"freed": freed, "bust_cost": 400}, 1.0, bust)
    for prompt, cached in later:
        account = payback.carry(account, prompt, cached, FACTS)
    assert account.state == state
    assert account.requests == len(later)
    if later:
        share = later[0][1] / later[0][0]
        first = freed * (share * 0.1 + (1 - share))
        assert account.realised >= first


def test_a_pending_account_closed_by_the_next_compaction_never_paid_back() -> None:
    account = payback.open_account("r1", {"freed": 100}, 1.0, 500.0)
    assert payback.close(account).state == payback.NOT_PAID_BACK
    paid = payback.open_account("r2", {"freed": 100}, 1.0, 0.0)
    assert payback.close(paid).state == payback.PAID_BACK


async def test_a_forced_compaction_is_followed_until_it_pays_back(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    try:
        # inject's whole cap (1,000 tokens) kept free under this small budget: the compaction
        # then leaves room for the requests that follow, which pay it back
        rules = [
            {"name": n, **({"reserve_ratio": 1.0} if n == "prune" else {})}
            for n in default_rule_names()
        ]
        settings = settings_from_mapping({"pipeline": {"on_rule_error": "fail"}, "rules": rules})
        engine = Engine(settings, store, budget_override=4000, strict=True)
        head = [system("Be brief."), TASK]
        steps = [
            (body(*head, *turns(1)), 0.0, Usage(2200, 0)),  # under the budget's room
            (body(*head, *turns(6)), 20.0, Usage(2000, 128)),  # compacts: re-bills
        ]
        lines, decided = [], []
        for i, (b, at, usage) in enumerate(steps):
            out = await engine.rewrite(b, {"x-session-id": "p"}, now=at)
            assert out.cache is not None
            line, events = engine.ledger.settle(out.cache, f"r{i}", usage)
            lines.append(line)
            decided += events
        opened = lines[1]["compaction"]
        assert opened["request_id"] == "r1" and opened["state"] == "pending"
        assert opened["bust"] == lines[1]["rebilled_cost"] > 0
        assert opened["freed"] > 0
        # the schedule's bust is net of what the compacted request left out, as is net_bust
        # (gpt-4o: r = 0.5)
        assert opened["net_bust"] == pytest.approx(opened["bust"] - 0.5 * opened["freed"], abs=0.2)
        assert opened["schedule_bust"] < opened["bust"]
        # later requests, appended to the compacted prompt, each cached: the savings add up
        n = 2
        while lines[-1].get("payback", {}).get("state") != "paid_back" and n < 40:
            b = body(*head, *turns(6), *turns(1, 10, start=10 + n))
            out = await engine.rewrite(b, {"x-session-id": "p"}, now=20.0 + n)
            assert out.cache is not None
            line, events = engine.ledger.settle(out.cache, f"r{n}", Usage(2100, 2000))
            lines.append(line)
            decided += events
            n += 1
        paid = lines[-1]["payback"]
        assert paid["state"] == "paid_back" and paid["request_id"] == "r1"
        assert paid["realised"] >= paid["bust"]
        # a compaction of the first request re-bills nothing (no cache yet): paid at once
        first = lines[0].get("compaction")
        assert first is None or (first["bust"], first["state"]) == (0, "paid_back")
        assert decided == ["paid_back"] * (2 if first else 1)
    finally:
        await store.close()


async def test_show_finds_the_account_as_it_stands_now() -> None:
    from proxy.inspect.cost_view import payback_text, with_account_now

    opened = {"request_id": "r1", "freed": 900, "bust": 400.0, "schedule_bust": -50.0,
              "net_bust": -500.0, "realised": 0.0, "requests": 0, "state": "pending"}  # fmt: skip
    now = {**opened, "realised": 410.5, "requests": 3, "state": "paid_back"}
    compacting = {"id": "r1", "session_id": "p/s", "cache": {"compaction": opened}}
    rows = [  # newest first, as the store lists them
        {"id": "r4", "session_id": "p/s", "cache": {"payback": now}},
        {"id": "r3", "session_id": "p/s", "cache": {"payback": {**now, "state": "pending"}}},
        compacting,
    ]

    class Store:
        async def list_requests(self, **kw: object) -> list[dict[str, object]]:
            assert kw["session"] == "p/s"
            return rows

    shown = await with_account_now(Store(), compacting)
    assert shown["account_now"] == now
    text = payback_text(shown)
    assert text is not None and text.startswith("this compaction: freed 900 tokens, re-billed 400")
    assert "saved 410.5 over 3 later requests: paid back" in text
