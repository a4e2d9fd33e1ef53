"""Inspection shows tenancy: requests from two principals (two passthrough keys) logged by the
app in-process, then ``ctxproxy logs`` / ``show`` and ``/ui`` name each request's and session's
principal (never the key), filter by it, and the session page tells the principal and the
client's own session name apart."""

from __future__ import annotations

import asyncio
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli import main
from proxy.inspect.logs_view import PRINCIPAL_WIDTH
from proxy.inspect.tenancy import session_filter, session_parts
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.factories import request, system, user
from tests.support.fake_upstream import FakeUpstream

KEY_A = "sk-alpha-secret-0123456789abcdef"
KEY_B = "sk-bravo-secret-fedcba9876543210"
NAME = "conv-1"  # both clients name their session alike: two sessions all the same


@dataclass
class Logged:
    """What two principals logged: each one's name and request ids, by key."""

    principal: dict[str, str]
    ids: dict[str, list[str]]

    def scoped(self, key: str) -> str:
        return f"{self.principal[key]}/{NAME}"


async def log_two_principals(client: Any, turns: int = 2) -> Logged:
    principal: dict[str, str] = {}
    ids: dict[str, list[str]] = {KEY_A: [], KEY_B: []}
    for key in (KEY_A, KEY_B):
        for turn in range(turns):
            r = await client.post(
                "/v1/chat/completions",
                json=request(system(), user(f"turn {turn}")),
                headers={"authorization": f"Bearer {key}", "x-session-id": NAME},
            )
            assert r.status_code == 200, r.text
            ids[key].append(r.headers["x-ctxproxy-request-id"])
    rows = {r["id"]: r for r in await log_rows(client)}
    for key in (KEY_A, KEY_B):
        (principal[key],) = {rows[i]["principal"] for i in ids[key]}
        assert principal[key].startswith("pt-")
        assert {rows[i]["session_id"] for i in ids[key]} == {f"{principal[key]}/{NAME}"}
    assert principal[KEY_A] != principal[KEY_B]
    return Logged(principal, ids)


@pytest.fixture
def settings(fake_upstream: FakeUpstream) -> Any:
    return proxy_settings(fake_upstream.base_url)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps cells at the default 80


async def logged_db(tmp_path: Path, settings: Any) -> tuple[str, Logged]:
    db = str(tmp_path / "log.db")
    async with in_process(settings, db) as client:
        logged = await log_two_principals(client)
    return db, logged


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """The command's exit code and what it printed (stdout); what was written to stderr until
    now (the in-process app's log lines too) never holds a key either."""
    before = capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    captured = capsys.readouterr()
    err = before.out + before.err + captured.err
    assert KEY_A not in err and KEY_B not in err
    return code, captured.out


def json_rows(out: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.splitlines() if line.strip()]


def compact(principal: str) -> str:
    """A principal as the compact column of ``logs`` shows it (a ``pt-`` name is cut)."""
    assert len(principal) > PRINCIPAL_WIDTH
    return principal[: PRINCIPAL_WIDTH - 1] + "…"


def table(out: str) -> list[dict[str, str]]:
    """The requests ``logs`` lists, one line each (time, id, principal, status, model, billed
    tokens, proxy ms), with the session of ``--wide``'s line under it."""
    rows: list[dict[str, str]] = []
    for line in out.splitlines():
        if re.match(r"\d\d:\d\d:\d\d ", line):
            _, rid, principal, status, model, *_ = line.split()
            rows.append({"id": rid, "principal": principal, "status": status, "model": model})
        elif line.startswith(" " * 9 + "session ") and rows:
            rows[-1]["session"] = line.split()[1]
    return rows


async def test_logs_names_both_principals_and_never_a_key(tmp_path: Path, settings, capsys) -> None:
    db, logged = await logged_db(tmp_path, settings)
    code, out = await cli(capsys, "logs", "--db", db, "--wide")
    assert code == 0
    rows = {r["id"]: r for r in table(out)}
    for key in (KEY_A, KEY_B):
        for rid in logged.ids[key]:
            # the compact principal, and the whole session id as --session takes it
            assert rows[rid]["principal"] == compact(logged.principal[key])
            assert rows[rid]["session"] == logged.scoped(key)
        assert key not in out and key[3:15] not in out
    code, out = await cli(capsys, "logs", "--db", db, "--json")
    rows = json_rows(out)
    assert {r["principal"] for r in rows} == set(logged.principal.values())
    assert KEY_A not in out and KEY_B not in out


async def test_logs_principal_filters_to_one(tmp_path: Path, settings, capsys) -> None:
    db, logged = await logged_db(tmp_path, settings)
    a, b = logged.principal[KEY_A], logged.principal[KEY_B]
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--principal", a)
    assert code == 0
    rows = json_rows(out)
    assert sorted(r["id"] for r in rows) == sorted(logged.ids[KEY_A])
    assert {r["principal"] for r in rows} == {a}
    code, out = await cli(capsys, "logs", "--db", db, "--principal", b)
    assert code == 0 and {r["principal"] for r in table(out)} == {compact(b)}
    assert sorted(r["id"] for r in table(out)) == sorted(logged.ids[KEY_B])
    # --session: the scoped id as logs prints it, or the client's own name with --principal
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", logged.scoped(KEY_B))
    assert sorted(r["id"] for r in json_rows(out)) == sorted(logged.ids[KEY_B])
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", NAME, "--principal", a)
    assert sorted(r["id"] for r in json_rows(out)) == sorted(logged.ids[KEY_A])
    # the client's own name alone: two principals' sessions of that name are an error naming
    # both (it named none, and a user saw "nothing logged" for the session they just ran)
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", NAME)
    assert code != 0 and out == ""


async def test_logs_session_by_the_clients_own_name(
    tmp_path: Path, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "log.db")
    async with in_process(settings, db) as client:
        r = await client.post("/v1/chat/completions", json=request(system(), user("hi")),
                              headers={"authorization": f"Bearer {KEY_A}",
                                       "x-session-id": "only-mine"})  # fmt: skip
        assert r.status_code == 200
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", "only-mine")
    assert code == 0
    (row,) = json_rows(out)
    assert row["id"] == r.headers["x-ctxproxy-request-id"]
    assert row["session_id"].endswith("/only-mine")
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", "nobody")
    assert code == 0 and out == ""


async def said_hi(client: Any, key: str, session: str) -> None:
    """One request of ``key``'s client in its session named ``session``."""
    r = await client.post("/v1/chat/completions", json=request(system(), user("hi")),
                          headers={"authorization": f"Bearer {key}",
                                   "x-session-id": session})  # fmt: skip
    assert r.status_code == 200


async def test_logs_session_named_like_anothers_id_is_ambiguous(
    tmp_path: Path, settings: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """B's client names its session as A's whole id (``pt-a…/mine``): the answer's header shows
    that name, and an operator asking for it got A's session, with no word of B's."""
    db = str(tmp_path / "log.db")
    async with in_process(settings, db) as client:
        await said_hi(client, KEY_A, "mine")
        a_id = (await log_rows(client))[0]["session_id"]
        await said_hi(client, KEY_B, a_id)
    code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", a_id)
    assert code != 0
    principal_a = a_id.split("/")[0]
    code, out = await cli(
        capsys, "logs", "--db", db, "--json", "--session", a_id, "--principal", principal_a
    )
    assert code == 0
    assert [row["session_id"] for row in json_rows(out)] == [a_id]


@pytest.mark.parametrize("name", ["my sess/1", "100%/done", "a%20b"])
async def test_logs_session_by_the_name_the_answers_header_shows(
    tmp_path: Path, settings: Any, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """The answer's ``x-ctxproxy-session-id`` shows the name percent-encoded (a space, ``%``
    itself, a character not ASCII): ``logs --session`` takes that too, alone or with
    ``--principal``, and still the name as sent ("a%20b" is a name of its own)."""
    db = str(tmp_path / "log.db")
    async with in_process(settings, db) as client:
        r = await client.post("/v1/chat/completions", json=request(system(), user("hi")),
                              headers={"authorization": f"Bearer {KEY_A}",
                                       "x-session-id": name})  # fmt: skip
        assert r.status_code == 200
        shown = r.headers["x-ctxproxy-session-id"]
        (logged,) = await log_rows(client)
    principal = logged["principal"]
    for given, extra in ((shown, []), (name, []), (shown, ["--principal", principal])):
        code, out = await cli(capsys, "logs", "--db", db, "--json", "--session", given, *extra)
        assert code == 0
        (row,) = json_rows(out)
        assert row["id"] == r.headers["x-ctxproxy-request-id"], given


async def test_logs_follow_filters_by_principal(tmp_path: Path, settings) -> None:
    import io

    from rich.console import Console

    from proxy.inspect.logs_view import follow

    db = str(tmp_path / "log.db")
    async with in_process(settings, db) as client:
        store = client.app.state.services.store
        out = io.StringIO()
        console = Console(file=out, width=250)
        logged = await log_two_principals(client)
        b = logged.principal[KEY_B]
        printed = await follow(
            store, console, principal=b, interval=0.01, since=0.0, polls=1, wide=True
        )
    text = out.getvalue()
    assert printed == len(logged.ids[KEY_B])
    assert all(rid in text for rid in logged.ids[KEY_B])
    assert all(rid not in text for rid in logged.ids[KEY_A])
    rows = table(text)
    assert {r["principal"] for r in rows} == {compact(b)}
    assert {r["session"] for r in rows} == {logged.scoped(KEY_B)}


async def test_ui_lists_and_filters_by_principal(tmp_path: Path, settings) -> None:
    async with in_process(settings, str(tmp_path / "log.db")) as client:
        logged = await log_two_principals(client)
        a, b = logged.principal[KEY_A], logged.principal[KEY_B]
        everything = (await client.get("/ui")).text
        assert 'name="principal"' in everything  # the filter form's field
        requests = everything.split('id="requests"')[1]
        for key in (KEY_A, KEY_B):
            link = f'<td><a class="principal" href="/ui?principal={logged.principal[key]}"'
            for rid in logged.ids[key]:  # each request's row names its principal
                row = requests.split(f'href="/ui/requests/{rid}"')[1].split("</tr>")[0]
                assert link in row
            assert key not in everything
        sessions = everything.split('id="sessions"')[1].split("</table>")[0]
        assert "<th>principal</th>" in sessions
        for name in (a, b):  # a principal column, and the client's own name as the link
            assert f'<td><a class="principal" href="/ui?principal={name}"' in sessions
            assert f'title="{name}/{NAME}">{NAME}</a>' in sessions

        page = await client.get("/ui", params={"principal": a})
        assert page.status_code == 200
        assert all(rid in page.text for rid in logged.ids[KEY_A])
        assert all(rid not in page.text for rid in logged.ids[KEY_B])
        assert f'name="principal" value="{a}"' in page.text
        sessions = page.text.split('id="sessions"')[1].split("</table>")[0]
        assert a in sessions and b not in sessions  # the session list is a's too
        # the client's own session name, scoped by the principal filter
        named = await client.get("/ui", params={"principal": b, "session": NAME})
        assert all(rid in named.text for rid in logged.ids[KEY_B])
        assert all(rid not in named.text for rid in logged.ids[KEY_A])


async def test_the_session_page_shows_the_principal_and_the_clients_name(
    tmp_path: Path, settings
) -> None:
    async with in_process(settings, str(tmp_path / "log.db")) as client:
        logged = await log_two_principals(client)
        a = logged.principal[KEY_A]
        page = await client.get(f"/ui/sessions/{logged.scoped(KEY_A)}")
        assert page.status_code == 200
        whose = re.search(r'<p class="meta" id="whose">(.*?)</p>', page.text, re.S)
        assert whose is not None
        text = html.unescape(re.sub(r"<[^>]+>", "", whose.group(1)))
        assert f"principal {a} · session {NAME} · scoped id {a}/{NAME}" in text
        assert all(rid in page.text for rid in logged.ids[KEY_A])
        assert all(rid not in page.text for rid in logged.ids[KEY_B])  # b's conv-1 is b's
        request_page = await client.get(f"/ui/requests/{logged.ids[KEY_A][0]}")
        assert f'href="/ui?principal={a}"' in request_page.text
        assert KEY_A not in page.text + request_page.text


async def test_show_prints_the_principal(tmp_path: Path, settings, capsys) -> None:
    db, logged = await logged_db(tmp_path, settings)
    for key in (KEY_A, KEY_B):
        code, out = await cli(capsys, "show", logged.ids[key][-1], "--db", db)
        assert code == 0
        assert f"principal {logged.principal[key]}  session {logged.scoped(key)}" in out
        assert KEY_A not in out and KEY_B not in out
    code, out = await cli(capsys, "show", "last", "--json", "--db", db)
    assert orjson.loads(out)["principal"] == logged.principal[KEY_B]


@pytest.mark.parametrize(
    ("session_id", "principal", "parts"),
    [
        ("pt-3f2a/conv:abc", "pt-3f2a", ("pt-3f2a", "conv:abc")),
        ("alice/a/b", "alice", ("alice", "a/b")),  # a client's name may hold a '/'
        ("legacy/old", "legacy", ("legacy", "old")),  # migrated
        ("sess-1", "legacy", ("legacy", "sess-1")),  # written without a principal
        ("x/y", "legacy", ("legacy", "x/y")),
        ("alice/s", None, ("alice", "s")),  # the column unknown: split at the first '/'
    ],
)
def test_session_parts(session_id: str, principal: str | None, parts: tuple[str, str]) -> None:
    assert session_parts(session_id, principal) == parts


@pytest.mark.parametrize(
    ("session", "principal", "scoped"),
    [
        (None, "alice", None),
        ("alice/s", None, "alice/s"),
        ("s", "alice", "alice/s"),
        ("alice/s", "alice", "alice/s"),
        ("a/b", "alice", "alice/a/b"),
    ],
)
def test_session_filter(session: str | None, principal: str | None, scoped: str | None) -> None:
    assert session_filter(session, principal) == scoped
