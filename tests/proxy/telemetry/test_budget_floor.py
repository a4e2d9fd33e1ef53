"""A budget below what every request carries (the system prompt and the tools schema alone over
it, as Claude Code's are at some 16,000 tokens under ``--budget 20000``): the first request of the
session says so, once, in its report and on its log line (at WARNING, whatever the level of the
others), with the budget, the floor and its parts; the forwarded bytes are those of a request
over the budget without it; a later request of the session does not say it again."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import log_rows
from tests.proxy.telemetry.test_jsonlog import app_with_log, upstream  # noqa: F401
from tests.support.edge_upstream import EdgeUpstream
from tests.support.factories import assistant, request, system, user

BUDGET = 1000
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "Runs a careful step of the agent's work. " * 30,
            "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        },
    }
    for i in range(4)
]
SYSTEM = "You are a coding agent. Follow the house rules carefully. " * 40


def body(turns: int) -> dict[str, Any]:
    messages = [system(SYSTEM), user("Fix the failing test in calc.py, please.")]
    for i in range(turns):
        messages += [assistant(f"Step {i} done: " + "looked at it " * 40), user(f"Go on {i}.")]
    return {**request(*messages), "tools": TOOLS}


class Heard(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in stream.getvalue().splitlines() if x.startswith("{")]


async def test_a_budget_below_the_floor_is_said_once(
    tmp_path: Path,
    upstream: EdgeUpstream,  # noqa: F811
) -> None:
    async with app_with_log(
        tmp_path,
        upstream,
        pipeline={"budget_tokens": BUDGET},
        logging={"level": "WARNING", "json_lines": True},
    ) as (client, stream):
        engine_log, heard = logging.getLogger("ctxproxy.engine"), Heard()
        engine_log.addHandler(heard)
        level, engine_log.level = engine_log.level, logging.DEBUG
        try:
            for turns in (1, 2, 3):
                r = await client.post(
                    "/v1/chat/completions", json=body(turns), headers={"x-session-id": "floor"}
                )
                assert r.status_code == 200, r.text
        finally:
            engine_log.removeHandler(heard)
            engine_log.setLevel(level)
        rows = sorted(await log_rows(client), key=lambda r: r["created_at"])
    # the engine's own line for a request over the budget is not repeated at WARNING on every
    # request of a session below its floor (its request line says it once)
    over = [r for r in heard.records if r.getMessage() == "request over budget"]
    assert len(over) == 3 and all(r.levelno == logging.DEBUG for r in over)
    told = [
        [w for w in r["report"].get("warnings", []) if w["kind"] == "budget_below_floor"]
        for r in rows
    ]
    assert [len(t) for t in told] == [1, 0, 0]  # once a session
    warning = told[0][0]
    assert warning["budget"] == BUDGET and warning["floor"] > BUDGET
    assert warning["tools"] > 0 and warning["system"] > 0
    assert warning["system"] + warning["tools"] + warning["protected"] <= warning["floor"]
    assert f"token budget ({BUDGET}) is below" in warning["note"]
    assert str(warning["floor"]) in warning["note"]
    # every request is still over the budget, and says that as before
    assert all(
        any(w["kind"] == "over_budget" for w in r["report"].get("warnings", [])) for r in rows
    )
    # the log: at WARNING only the request that says it (the others are 200s at INFO)
    logged = lines(stream)
    requests = [x for x in logged if x.get("event") == "request"]
    assert len(requests) == 1
    # the engine's line for a request over the budget: not on every request of such a session
    line = requests[0]
    assert line["level"] == "WARNING" and line["budget"] == BUDGET
    assert line["floor"] == warning["floor"] and line["warning"] == warning["note"]
    # nothing of it is forwarded
    assert all(b"below what every request" not in seen.body for seen in upstream.seen)


async def test_siblings_of_one_session_are_told_once(
    tmp_path: Path,
    upstream: EdgeUpstream,  # noqa: F811
) -> None:
    """Three requests of one session that share their start but not their last turn (branches,
    not one conversation extended): the floor is said once a session, not once a branch."""
    async with app_with_log(
        tmp_path, upstream, pipeline={"budget_tokens": BUDGET}, logging={"level": "WARNING"}
    ) as (client, _):
        for last in ("Go on.", "Try another way.", "Stop and sum up."):
            b = body(1)
            b["messages"][-1] = user(last)
            r = await client.post("/v1/chat/completions", json=b, headers={"x-session-id": "s"})
            assert r.status_code == 200, r.text
        rows = await log_rows(client)
    told = [
        w
        for r in rows
        for w in r["report"].get("warnings", [])
        if w["kind"] == "budget_below_floor"
    ]
    assert len(rows) == 3 and len(told) == 1
