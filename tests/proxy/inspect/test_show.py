"""``ctxproxy show`` and ``ctxproxy logs --follow``, and the report readers behind them (and
behind /ui). Rows come from the live proxy where the rules already report something, and are
written through the real Store API where a section is still empty today."""

from __future__ import annotations

import asyncio
import io
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from rich.console import Console

from proxy.cli import main
from proxy.inspect import report_view as rv
from proxy.inspect import usage_view
from proxy.inspect.logs_view import follow
from proxy.store.sqlite import Store
from tests.support.factories import assistant, request, result, shell, system, user

FILE_TEXT = "\n".join(f"def f{i}(x):\n    return x + {i}" for i in range(20))
PLACEHOLDER = "[ctxproxy: read of calc.py elided: 40 lines, 395 tokens; re-read below]"
SYNTHETIC = "[ctxproxy: call interrupted; no result was recorded]"


def realistic_row(
    request_id: str = "req_show_1", session: str = "sess-show", created_at: float | None = None
) -> dict[str, Any]:
    """A logged request in the report shape of design section 6: a repaired chain, an entity, a
    resolved reference, a working set, a pruned read, captured payloads."""
    client = request(
        system(),
        user("Fix the failing test in calc.py"),
        assistant(None, shell("call_1", "cat calc.py")),
        result("call_1", FILE_TEXT),
        assistant(None, shell("call_2", "pytest -q"), shell("call_3", "mkdir -p fixes")),
        result("call_2", "FAILED tests/test_calc.py::test_add - assert 3 == 4\n1 failed"),
        user("put the fix in the folder I just created"),
    )
    forwarded = request(*client["messages"])
    msgs = forwarded["messages"]
    msgs[3] = result("call_1", PLACEHOLDER)
    msgs.insert(6, result("call_3", SYNTHETIC))
    msgs[7] = user(
        msgs[7]["content"] + "\n\n<ctxproxy-context>Resolved: the folder I just "
        "created = fixes/</ctxproxy-context>"
    )
    report = {
        "session": session,
        "tokens": {"before": 912, "after": 547, "budget": 8000},
        "sections": {
            "system": {"before": 6, "after": 6},
            "user": {"before": 16, "after": 16},
            "tool_calls": {"before": 30, "after": 30},
            "tool_results": {"before": 820, "after": 14},
            "injected": {"before": 0, "after": 21},
            "placeholders": {"before": 0, "after": 36},
        },
        "repairs": [
            {
                "kind": "missing_result",
                "index": 4,
                "tool_call_id": "call_3",
                "action": "synthetic_result",
            }
        ],
        "entities": [
            {
                "type": "folder",
                "name": "fixes",
                "path": "/work/fixes",
                "action": "create",
                "source": "call_3",
            }
        ],
        "references": [
            {
                "mention": "the folder I just created",
                "entity": "/work/fixes",
                "confidence": 0.92,
                "chain": ["create", "most recent folder"],
            }
        ],
        "working_set": {
            "goal": "Fix the failing test in calc.py",
            "open_diagnostics": ["tests/test_calc.py::test_add assert 3 == 4"],
            "next_repair_target": "calc.py:1",
        },
        "pruning": [
            {
                "index": 3,
                "tool_call_id": "call_1",
                "action": "mask",
                "stage": "supersede",
                "reason": "file re-read later",
                "tokens_freed": 395,
            }
        ],
        "prune": {"stages": {"supersede": 395}},
        "prefix_reuse": 0.8123,
        "warnings": [],
        "rule_errors": [],
        "timings_ms": {"repair_tool_chain": 0.21, "prune": 0.87, "measure": 0.33},
    }
    return {
        "id": request_id,
        "created_at": created_at or time.time(),
        "session_id": session,
        "path": "/v1/chat/completions",
        "model": "gpt-4o",
        "upstream": "fake",
        "stream": 0,
        "tokens_before": 912,
        "tokens_after": 547,
        "sections": report["sections"],
        "report": report,
        "overhead_ms": 1.734,
        "request_body": orjson.dumps(client).decode(),
        "forwarded_body": orjson.dumps(forwarded).decode(),
    }


FINISHED = {
    "status": 200,
    "latency_ms": 812.5,
    "ttfb_ms": 640.0,
    "prompt_tokens": 547,
    "completion_tokens": 19,
    "cached_tokens": 384,
    "usage": {"prompt_tokens": 547, "completion_tokens": 19},
}


async def write_rows(db: str, *rows: dict[str, Any], finish: bool = True) -> None:
    store = Store(db)
    await store.open()
    try:
        for row in rows:
            await store.insert_request(row)
            if finish:
                await store.finish_request(row["id"], FINISHED)
        await store.flush()
    finally:
        await store.close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "220")  # rich wraps cells at the default 80


async def test_show_renders_repairs_pruning_and_diff(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "log.db")
    await write_rows(db, realistic_row())
    code, out = await asyncio.to_thread(run_cli, capsys, "show", "req_show_1", "--db", db)
    assert code == 0
    lines = out.splitlines()
    # Sections with numbers before/after and the delta, plus the total line.
    assert any("tool_results" in x and "820" in x and "14" in x and "-806" in x for x in lines)
    assert "billed input 912 → 547 tokens (-365) = messages 912 → 547 + tools schema 0" in out
    # Each rule's decisions, in data.
    assert any("missing_result" in x and "call_3" in x and "synthetic_result" in x for x in lines)
    assert any("the folder I just created" in x and "0.92" in x for x in lines)
    assert any("supersede" in x and "395" in x for x in lines)
    assert "tokens freed by stage: supersede 395 (total 395)" in out
    assert "next_repair_target" in out and "calc.py:1" in out
    # Usage, cache and latency; upstream time is latency minus overhead.
    assert any("cached tokens" in x and "384" in x for x in lines)
    assert any("cached share" in x and "70%" in x for x in lines)  # 384 of 547
    assert any("upstream ms" in x and "810.766" in x for x in lines)
    assert any("prune" in x and "0.870" in x for x in lines)
    # The diff: the pruned read, the synthetic result and the injected block.
    assert "~ message 3 → 3 (tool)" in out
    assert f"+{PLACEHOLDER}" in out and "-def f0(x):" in out
    assert "+ message 6 added by the proxy (tool)" in out and SYNTHETIC in out
    assert "~ message 6 → 7 (user)" in out and "<ctxproxy-context>" in out
    assert "= messages 0..2 unchanged" in out


async def test_show_last_json_and_missing(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "log.db")
    await write_rows(
        db, realistic_row("req_old", created_at=time.time() - 10), realistic_row("req_new")
    )
    code, out = await asyncio.to_thread(run_cli, capsys, "show", "last", "--json", "--db", db)
    assert code == 0 and orjson.loads(out)["id"] == "req_new"
    code, out = await asyncio.to_thread(run_cli, capsys, "show", "req_nope", "--db", db)
    assert code == 1 and "no logged request 'req_nope'" in out


def test_show_a_request_served_by_the_live_proxy(live_proxy, fake_upstream, capsys) -> None:
    proxy = live_proxy(store={"capture_payloads": True})
    body = request(system("Be brief."), user("Say hi"))
    r = httpx.post(
        proxy.base_url + "/chat/completions",
        json=body,
        headers={"authorization": "Bearer sk-live-secret-abcdef123456"},
    )
    assert r.status_code == 200
    rid = r.headers["x-ctxproxy-request-id"]
    row = proxy.row(rid)
    code, out = run_cli(capsys, "show", rid, "--db", proxy.db_path)
    assert code == 0
    assert rid in out and "status 200" in out
    assert any(
        "system" in x and str(row["sections"]["system"]["before"]) in x for x in out.splitlines()
    )
    assert any("cached tokens" in x and "5" in x for x in out.splitlines())  # fake upstream
    # The diff of what the proxy really forwarded (the fake upstream saw it) against the client.
    forwarded = fake_upstream.last["messages"]
    assert forwarded[0] == body["messages"][0]
    if forwarded[1] != body["messages"][1]:  # a rule injected a block at the tail
        assert "= messages 0..0 unchanged" in out and "~ message 1 → 1 (user)" in out
    else:
        assert "= messages 0..1 unchanged" in out
    assert "sk-live-secret" not in out


def test_show_without_captured_payloads_says_so(live_proxy, capsys) -> None:
    proxy = live_proxy()
    r = httpx.post(proxy.base_url + "/chat/completions", json=request(user("hi")))
    proxy.row(r.headers["x-ctxproxy-request-id"])
    code, out = run_cli(capsys, "show", "last", "--db", proxy.db_path)
    assert code == 0 and "payloads not captured" in out


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ({}, {}),
        (
            {
                "pruning": [
                    {"action": "mask", "tokens_freed": 10},
                    {"action": "mask", "tokens_freed": 5},
                    {"stage": "cap", "action": "truncate", "tokens_freed": 7},
                ]
            },
            {"mask": 15, "cap": 7},
        ),
        # Totals from the rule win over per-item sums (no double counting).
        (
            {
                "pruning": [{"action": "mask", "tokens_freed": 10}],
                "prune": {"stages": {"mask": 12}},
            },
            {"mask": 12},
        ),
        (
            {
                "prune": {
                    "stages": [
                        {"stage": "drop_turns", "tokens_freed": 300},
                        {"name": "cap", "tokens_freed": 0},
                    ]
                }
            },
            {"drop_turns": 300},
        ),
        ({"prune": {"stages": {"cap": {"tokens_freed": 40}}}}, {"cap": 40}),
        ({"pruning": "garbage", "prune": None}, {}),
        # the rule's totals, none: nothing, whatever the items say
        ({"pruning": [{"action": "mask", "tokens_freed": 10}], "prune": {"stages": {}}}, {}),
        ({"pruning": [{"action": "mask", "tokens_freed": 10}], "prune": {"stages": []}}, {}),
        ({"pruning": [{"stage": "mask", "tokens_freed": 7}], "prune": {}}, {"mask": 7}),
        ({"pruning": [], "prune": {"stages": None}}, {}),
        ({}, {}),
    ],
)
def test_freed_by_stage_is_tolerant(report: dict[str, Any], expected: dict[str, int]) -> None:
    assert rv.freed_by_stage(report) == expected


@pytest.mark.parametrize(
    ("client", "forwarded", "ops"),
    [
        ([user("a")], [user("a")], ["same"]),
        ([user("a"), user("b")], [user("a"), user("B")], ["same", "changed"]),
        ([user("a"), user("b")], [user("a")], ["same", "removed"]),
        ([user("a")], [user("a"), user("extra")], ["same", "added"]),
        ([user("a")], [{"role": "user", "content": "a", "name": "x"}], ["changed"]),
    ],
)
def test_message_diff_ops(client, forwarded, ops) -> None:
    row = {
        "request_body": orjson.dumps({"messages": client}).decode(),
        "forwarded_body": orjson.dumps({"messages": forwarded}).decode(),
    }
    diff = rv.message_diff(row)
    assert diff is not None and [d["op"] for d in diff] == ops
    assert all(d["lines"] for d in diff if d["op"] != "same")


def test_message_diff_is_none_without_payloads_and_caps_long_messages() -> None:
    assert rv.message_diff({"request_body": None, "forwarded_body": None}) is None
    long = "\n".join(f"line {i}" for i in range(500))
    row = {
        "request_body": orjson.dumps({"messages": [result("c", long)]}).decode(),
        "forwarded_body": orjson.dumps({"messages": [result("c", PLACEHOLDER)]}).decode(),
    }
    (entry,) = rv.message_diff(row) or []
    assert len(entry["lines"]) == rv.MAX_DIFF_LINES + 1
    assert entry["lines"][-1].startswith("… ") and entry["lines"][-1].endswith("more lines")


async def test_logs_follow_prints_each_request_once_when_it_completes(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    start = time.time()
    await write_rows(db, realistic_row("req_before", created_at=start - 5))  # history: not shown
    store = Store(db)
    await store.open()
    out = io.StringIO()
    console = Console(file=out, width=250)
    try:
        task = asyncio.create_task(
            follow(store, console, interval=0.03, since=start, polls=12, wide=True)
        )
        await store.insert_request(realistic_row("req_a", created_at=start + 0.01))
        await store.finish_request("req_a", FINISHED)
        await store.insert_request(realistic_row("req_slow", created_at=start + 0.02))
        await store.flush()
        await asyncio.sleep(0.15)
        assert "req_a" in out.getvalue() and "req_slow" not in out.getvalue()  # in flight
        await store.insert_request(realistic_row("req_b", created_at=start + 0.03))
        await store.finish_request(
            "req_b", {**FINISHED, "status": 502, "error_type": "upstream_connection_error"}
        )
        await store.finish_request("req_slow", FINISHED)
        await store.flush()
        printed = await task
    finally:
        await store.close()
    text = out.getvalue()
    assert printed == 3 and "req_before" not in text
    assert [text.count(r) for r in ("req_a", "req_slow", "req_b")] == [1, 1, 1]
    lines = text.splitlines()
    at = next(i for i, x in enumerate(lines) if "req_b" in x)
    line_b, details = lines[at], lines[at + 1]
    assert " 502 " in line_b and "upstream_connection_error" in line_b and " 912→547 " in line_b
    assert "cached 384" in details and "repairs 1 · pruned 1" in details


def test_show_a_request_that_failed_before_the_rules(tmp_path: Path, capsys) -> None:
    db = str(tmp_path / "log.db")
    row = {
        "id": "req_bad",
        "created_at": time.time(),
        "path": "/v1/chat/completions",
        "overhead_ms": 0.2,
    }
    asyncio.run(write_rows(db, row, finish=False))
    asyncio.run(
        _finish(
            db,
            "req_bad",
            {"status": 400, "latency_ms": 0.4, "error_type": "invalid_json", "error": "not JSON"},
        )
    )
    code, out = run_cli(capsys, "show", "req_bad", "--db", db)
    assert code == 0 and "status 400" in out
    assert "Sections: none" in out and "invalid_json: not JSON" in out
    assert any(
        x.split("│")[1:3] == [" upstream ms              ", "    - "]
        or ("upstream ms" in x and x.rstrip(" │").endswith("-"))
        for x in out.splitlines()
    )


async def _finish(db: str, request_id: str, fields: dict[str, Any]) -> None:
    store = Store(db)
    await store.open()
    try:
        await store.finish_request(request_id, fields)
        await store.flush()
    finally:
        await store.close()


def test_logs_follow_command_tails_the_log(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    asyncio.run(write_rows(db, realistic_row("req_old", created_at=time.time() - 60)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "logs", "--follow", "--db", db, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "250"},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    try:
        assert "following new requests" in lines.get(timeout=20)
        asyncio.run(write_rows(db, realistic_row("req_live")))
        line = lines.get(timeout=10)  # printed while the command keeps running
        assert "req_live" in line and " 912→547 " in line and " 200 " in line
    finally:
        proc.terminate()
        proc.wait(10)
    assert lines.empty()  # nothing else: the older request is history, not news


def agent_history(turns: int = 14) -> list[dict[str, Any]]:
    """A long agent session with an interrupted parallel call and a vague reference at the end:
    enough for today's rules to repair, prune, track and resolve."""
    msgs = [system(), user("Fix the failing tests in the repo")]
    for i in range(turns):
        out = "\n".join(f"line {j} of file {i}: value = {j * i}" for j in range(60))
        msgs += [
            assistant(None, shell(f"call_{i}", f"cat src/file{i}.py")),
            result(f"call_{i}", out),
        ]
    msgs += [
        assistant(None, shell("call_mk", "mkdir -p build/out"), shell("call_lost", "pwd")),
        result("call_mk", ""),
        user("now put the report in the folder I just created"),
    ]
    return msgs


def test_show_lists_what_the_live_rules_did(live_proxy, capsys) -> None:
    proxy = live_proxy(
        store={"capture_payloads": True},
        pipeline={"on_rule_error": "fail", "budget_tokens": 2000},
    )
    r = httpx.post(proxy.base_url + "/chat/completions", json=request(*agent_history()))
    assert r.status_code == 200
    row = proxy.row(r.headers["x-ctxproxy-request-id"])
    report = row["report"]
    assert report["repairs"] and report["pruning"], "today's rules repair and prune this"
    code, out = run_cli(capsys, "show", row["id"], "--db", proxy.db_path)
    assert code == 0
    lines = out.splitlines()
    for item in report["repairs"]:
        assert any(item["kind"] in x and item["tool_call_id"] in x for x in lines), item
    assert f"Pruning ({len(report['pruning'])})" in out
    for item in report["pruning"]:
        key = item.get("tool_call_id") or str(item.get("index"))
        assert any(key in x and item["action"] in x for x in lines), item
    stages = rv.freed_by_stage(report)
    summary = ", ".join(f"{k} {v}" for k, v in sorted(stages.items()))
    assert f"tokens freed by stage: {summary} (total {sum(stages.values())})" in out
    for entity in report["entities"]:
        assert entity["path"] in out
    for ref in report["references"]:
        assert ref["mention"] in out
    total = f"billed input {row['tokens_before']} → {row['tokens_after']} tokens"  # no tools
    assert total in out and row["tokens_after"] < row["tokens_before"]
    # The diff shows the synthetic result the repair added for the interrupted call.
    diff = rv.message_diff(row) or []
    added = [d for d in diff if d["op"] == "added" and d["role"] == "tool"]
    assert added and f"+ message {added[0]['forwarded']} added by the proxy (tool)" in out


def test_show_summarises_the_cache_economics_of_a_request() -> None:
    """The schedule's decision with its figures, inject's sticky blocks, the cost model's facts
    and litellm's cache breakpoints, as `ctxproxy show` lists them."""
    report = {
        "cache": {"read_ratio": 0.1, "source": "litellm", "ttl_s": 300, "min_prefix": 1024},
        "prune": {
            "schedule": {
                "decision": "cold",
                "cache": "cold",
                "why": "idle 420 s > ttl 300 s",
                "bust_cost": 0,
                "expected_saving": 0,
                "horizon": 41.5,
            }
        },
        "inject": {"sticky": 3, "added": True, "delta": True},
        "breakpoints": {"placed": ["system", "tools", "previous_tail", "tail"], "client": 0},
    }
    pairs = dict(usage_view.usage_summary({"report": report}))
    assert pairs["compaction"].startswith("cold (cache cold: idle 420 s > ttl 300 s;")
    assert "horizon 41.5 requests" in pairs["compaction"]
    assert pairs["injected blocks"] == "3 replayed, added: delta"
    assert pairs["cache breakpoints"] == "system, tools, previous_tail, tail"
    assert pairs["cache read ratio"] == "0.1 (litellm)"
    # a request held over the budget says why
    held = {"decision": "held", "held": "spacing", "cache": "warm", "why": "idle 5 s"}
    report["prune"]["schedule"].update(held)
    pairs = dict(usage_view.usage_summary({"report": report}))
    assert pairs["compaction"].startswith("held: spacing (cache warm: idle 5 s;")


@pytest.mark.parametrize(
    ("report", "repairs", "loops"),
    [
        ({}, {}, {}),
        ({"repairs": [], "loops": None}, {}, {}),
        ({"repairs": "garbage", "loops": 3}, {}, {}),
        (
            {"repairs": [{"kind": "orphan_result"}, {"kind": "orphan_result"}, "x"],
             "loops": [{"kind": "repeat"}, {}]},
            {"orphan_result": 2, "unknown": 1},
            {"repeat": 1, "unknown": 1},
        ),
    ],
)  # fmt: skip
def test_repair_and_loop_kinds_are_counted_and_tolerant(
    report: dict[str, Any], repairs: dict[str, int], loops: dict[str, int]
) -> None:
    assert rv.repair_kinds(report) == repairs
    assert rv.loop_kinds(report) == loops
