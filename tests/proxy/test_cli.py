"""The ctxproxy command: rewrite (stdin/file, state across calls, bad input), logs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.support.factories import request, user


def ctxproxy(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args], input=stdin, capture_output=True, timeout=120
    )


def test_rewrite_prints_request_and_report(tmp_path: Path) -> None:
    body = request({"role": "system", "content": "sys"}, user("hello"))
    out = ctxproxy("rewrite", "-", stdin=orjson.dumps(body))
    assert out.returncode == 0, out.stderr
    data = orjson.loads(out.stdout)
    assert data["request"]["messages"][0] == {"role": "system", "content": "sys"}
    assert data["request"]["messages"][1]["role"] == "user"
    assert data["report"]["sections"]["system"]["before"] > 0
    assert data["report"]["tokens"]["before"] > 0


def test_rewrite_state_persists_with_db(tmp_path: Path) -> None:
    f = tmp_path / "body.json"
    f.write_bytes(orjson.dumps(request(user("hello"))))
    db = str(tmp_path / "state.db")
    args = ("rewrite", "--db", db, "--session", "s1", "--now", "1000", str(f))
    first = orjson.loads(ctxproxy(*args).stdout)
    second = orjson.loads(ctxproxy(*args).stdout)
    assert first["report"]["session"] == "anonymous/s1"
    assert first["report"]["prefix_reuse"] is None
    assert second["report"]["prefix_reuse"] is not None  # the first call's state was kept


@pytest.mark.parametrize(
    ("protocol", "body", "key"),
    [
        (
            "anthropic",
            {"model": "claude-x", "max_tokens": 9, "system": "sys",
             "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
            "messages",
        ),
        ("responses", {"model": "gpt-5", "input": "hi", "instructions": "sys"}, "input"),
    ],
)  # fmt: skip
def test_rewrite_reads_the_other_protocols(protocol: str, body: dict, key: str) -> None:  # type: ignore[type-arg]
    out = ctxproxy("rewrite", "--protocol", protocol, "-", stdin=orjson.dumps(body))
    assert out.returncode == 0, out.stderr
    data = orjson.loads(out.stdout)
    assert data["request"][key] == body[key]  # nothing to change: forwarded as sent
    assert data["report"]["protocol"] == protocol
    assert data["report"]["sections"]["system"]["before"] > 0


def test_rewrite_reads_gemini_with_the_model_named_apart(tmp_path: Path) -> None:
    call = {"functionCall": {"id": "a", "name": "run_shell_command", "args": {"command": "ls"}}}
    done = {"functionResponse": {"id": "a", "name": "run_shell_command",
                                 "response": {"output": "x"}}}  # fmt: skip
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]},
                     {"role": "model", "parts": [call]}, {"role": "user", "parts": [done, done]}],
        "systemInstruction": {"parts": [{"text": "sys"}]},
    }  # fmt: skip
    args = ("rewrite", "--db", str(tmp_path / "db"), "--protocol", "gemini")
    out = ctxproxy(*args, "--model", "gemini-2.5-flash", "-", stdin=orjson.dumps(body))
    assert out.returncode == 0, out.stderr
    data = orjson.loads(out.stdout)
    assert data["request"]["contents"][2]["parts"] == [done]  # the doubled response, once
    assert data["report"]["protocol"] == "gemini"
    bad = ctxproxy(*args, "--model", "no/such", "-", stdin=orjson.dumps(body))
    assert bad.returncode == 2 and orjson.loads(bad.stderr)["error"]["param"] == "model"


def test_rewrite_bad_input_exits_2_with_openai_error() -> None:
    out = ctxproxy("rewrite", "-", stdin=b'{"model": "m"}')
    assert out.returncode == 2
    err = orjson.loads(out.stderr)
    assert err["error"]["param"] == "messages"
    assert out.stdout == b""


def test_bad_config_exits_2_naming_the_option(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("rules:\n  - name: measure\n    wat: 1\n")
    out = ctxproxy("rewrite", "--config", str(cfg), "-", stdin=orjson.dumps(request(user("x"))))
    assert out.returncode == 2
    assert b"rules[0].wat" in out.stderr


def test_logs_json_lists_nothing_for_a_fresh_db(tmp_path: Path) -> None:
    import asyncio

    from proxy.store.sqlite import Store

    async def create() -> None:
        store = Store(str(tmp_path / "x.db"))
        await store.open()
        await store.close()

    asyncio.run(create())
    out = ctxproxy("logs", "--db", str(tmp_path / "x.db"), "--json")
    assert out.returncode == 0 and out.stdout == b""


@pytest.mark.parametrize(
    "argv",
    [
        ["logs", "--db", "{tmp}/typo/x.db"],
        ["logs", "--json", "--db", "{tmp}/missing.db"],
        ["show", "last", "--db", "{tmp}/typo/x.db"],
        ["show", "req_x", "--json", "--db", "{tmp}/missing.db"],
    ],
)
def test_read_commands_do_not_create_a_missing_log(tmp_path: Path, capsys, argv) -> None:
    from proxy.cli import main

    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and argv[-1] in err
    assert list(tmp_path.iterdir()) == []  # nothing created


@pytest.mark.parametrize("limit", ["-1", "0", "x", "99999999999999999999", "1000001"])
def test_logs_limit_must_be_positive(tmp_path: Path, capsys, limit: str) -> None:
    from proxy.cli import main

    with pytest.raises(SystemExit) as info:
        main(["logs", "--db", str(tmp_path / "x.db"), "--limit", limit])
    assert info.value.code == 2 and "--limit" in capsys.readouterr().err


def test_rewrite_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    out = ctxproxy("rewrite", str(tmp_path / "missing.json"))
    assert out.returncode == 2
    assert b"Traceback" not in out.stderr and b"missing.json" in out.stderr


def test_a_budget_or_a_limit_out_of_range_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--budget 5`` skipped ``budget_tokens``' least of 256; a negative body limit or upstream
    timeout was taken, and every request then refused ("the limit is -1 bytes")."""
    from proxy.cli import main
    from proxy.settings import SettingsError, settings_from_mapping

    body = tmp_path / "body.json"
    body.write_text('{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}')
    assert main(["rewrite", str(body), "--budget", "5", "--db", str(tmp_path / "l.db")]) == 2
    assert "--budget 5: at least 256 tokens" in capsys.readouterr().err
    for config, field in (
        ({"limits": {"max_body_bytes": -1}}, "limits.max_body_bytes"),
        ({"upstreams": [{"name": "o", "timeout_s": -1}]}, "upstreams[0].timeout_s"),
        ({"upstreams": [{"name": "o", "connect_timeout_s": 0}]}, "upstreams[0].connect_timeout_s"),
    ):
        try:
            settings_from_mapping(config)
        except SettingsError as exc:
            assert field in str(exc)
        else:
            raise AssertionError(f"{config} accepted")


def test_rewrite_reads_a_served_log_without_writing_it(tmp_path: Path) -> None:
    """A log a ``ctxproxy serve`` holds (its lock) is the server's to write: rewrite continues
    its session and saves nothing, where it saved a state under the server's feet."""
    import sqlite3

    from proxy.store.serve_lock import hold

    f = tmp_path / "body.json"
    f.write_bytes(orjson.dumps(request(user("hello"))))
    db = str(tmp_path / "state.db")
    args = ("rewrite", "--db", db, "--session", "s1", "--now", "1000", str(f))
    assert ctxproxy(*args).returncode == 0  # a log no server uses: its state kept
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT id, version FROM sessions ORDER BY id").fetchall()
    lock = hold(db)  # as serve holds it
    try:
        served = ctxproxy("rewrite", "--db", db, "--session", "s2", str(f))
        again = orjson.loads(ctxproxy(*args).stdout)
    finally:
        assert lock is not None
        lock.close()
    assert served.returncode == 0, served.stderr
    assert again["report"]["prefix_reuse"] is not None  # the server's session, read
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT id, version FROM sessions ORDER BY id").fetchall()
    assert after == before


def test_rewrite_without_a_log_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    out = ctxproxy("rewrite", "-", stdin=orjson.dumps(request(user("hello"))))
    assert out.returncode == 0, out.stderr
    assert os.listdir(tmp_path) == []


def test_rewrite_of_gemini_without_a_model_says_to_name_it() -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    out = ctxproxy("rewrite", "--protocol", "gemini", "-", stdin=orjson.dumps(body))
    assert out.returncode == 2
    assert b"--model" in out.stderr


def test_no_command_prints_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``ctxproxy`` alone: the commands and what they do, not argparse's "arguments are
    required"."""
    from proxy.cli import main

    assert main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: ctxproxy") and "serve" in out and "logs" in out


def test_a_cost_line_counts_one_request_as_one() -> None:
    from proxy.inspect.cost_view import SessionCost, cost_text

    one = cost_text(SessionCost(requests=1, cost=10.0, direct=12.0))
    two = cost_text(SessionCost(requests=2, cost=10.0, direct=12.0))
    assert " over 1 request;" in one and " over 2 requests;" in two
