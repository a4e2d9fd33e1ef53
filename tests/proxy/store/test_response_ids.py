"""The response ids relayed to each principal (``proxy.server.response_ids``), in both stores: known
to another process on the same store (a replica, a restart) once written, never to another
principal, forgotten with the request log's retention; the memory's LRU bounds; the id read from
a whole answer and from a stream cut anywhere."""

from __future__ import annotations

import asyncio
import random
import tracemalloc
from typing import Any

import orjson
import pytest

from proxy import charge_groups
from proxy.errors import ProxyError
from proxy.server.response_ids import (
    SCAN_LIMIT,
    CannotVerify,
    Recorder,
    ResponseIds,
    _Lru,
)
from proxy.store.dialect import SQLITE
from proxy.store.retention import DAY_S, prune_now
from tests.support.anthropic_upstream import event, response_events, response_object

NOW = 1_800_000_000.0


async def test_an_id_is_known_to_its_principal_on_another_process(make_store: Any) -> None:
    one, two = make_store(batch_window_s=0.01), make_store(batch_window_s=0.01)
    await one.open()
    await two.open()
    try:
        ResponseIds(one).note("alice", "resp_1", NOW)
        await one.flush()
        fresh = ResponseIds(two)  # nothing in its memory: read from the store
        assert await fresh.known("alice", "resp_1", NOW + 1)
        assert not await fresh.known("bob", "resp_1", NOW + 1)
        assert not await fresh.known("alice", "resp_2", NOW + 1)
        assert fresh.memory.get("alice", "resp_1") == (NOW, None)  # kept in memory once read
    finally:
        await one.close()
        await two.close()


async def test_a_note_is_written_once(store: Any) -> None:
    ids = ResponseIds(store)
    for at in (NOW, NOW + 1, NOW + 2):
        ids.note("alice", "resp_1", at)
    ids.note("bob", "resp_1", NOW + 3)  # the same id relayed to two principals: both hold it
    await store.flush()
    rows = await store.fetchall("SELECT principal, id, created_at FROM response_ids", ())
    assert sorted(tuple(r) for r in rows) == [("alice", "resp_1", NOW), ("bob", "resp_1", NOW + 3)]


async def test_ids_expire_with_the_request_log(store: Any) -> None:
    ids = ResponseIds(store, retention_days=1)
    ids.note("alice", "resp_old", NOW - 2 * DAY_S)
    ids.note("alice", "resp_new", NOW - 0.5 * DAY_S)
    await store.flush()
    assert not await ids.known("alice", "resp_old", NOW)  # from memory
    assert not await ResponseIds(store, retention_days=1).known("alice", "resp_old", NOW)
    assert await ids.known("alice", "resp_new", NOW)
    counts = await prune_now(store, retention_days=1, session_ttl_days=0, now=NOW)
    assert counts["response_ids"] == 1
    rows = await store.fetchall("SELECT id FROM response_ids", ())
    assert [r[0] for r in rows] == ["resp_new"]
    assert (await prune_now(store, 0, 0, now=NOW))["response_ids"] == 0  # 0 days: kept forever


@pytest.mark.parametrize("late_s", [0.05, 0.5], ids=["a-moment", "under-load"])
async def test_a_replica_finds_an_id_still_being_written(make_store: Any, late_s: float) -> None:
    """PostgreSQL: a miss is read again a moment later, and again (the other replica's writer,
    half a second later while another tenant loads it: one read again after 0.25 s refused 2 of
    670 such continuations with a 400 that says the conversation is gone); reads over 1.3 s."""
    one, two = make_store(batch_window_s=0.01), make_store(batch_window_s=0.01)
    if one.kind != "postgresql":
        pytest.skip("one process per SQLite file: its memory knows at once")
    await one.open()
    await two.open()
    try:
        asking = asyncio.create_task(ResponseIds(two).known("alice", "resp_late", NOW))
        await asyncio.sleep(late_s)  # the first read has missed
        ResponseIds(one).note("alice", "resp_late", NOW)
        await one.flush()
        assert await asking
        assert not await ResponseIds(two).known("alice", "resp_never", NOW)  # then no
    finally:
        await one.close()
        await two.close()


class _Down:
    """A store whose reads fail."""

    kind = "sqlite"
    dialect = SQLITE

    def write_later(self, sql: str, params: tuple[Any, ...]) -> None:
        pass

    async def fetchrow(self, sql: str, params: tuple[Any, ...]) -> Any:
        raise OSError("database away")


async def test_a_store_that_cannot_be_read_refuses_with_503() -> None:
    ids = ResponseIds(_Down())  # type: ignore[arg-type]
    with pytest.raises(CannotVerify) as raised:
        await ids.require("alice", {"previous_response_id": "resp_1"})
    assert raised.value.status == 503 and raised.value.param == "previous_response_id"
    ids.note("alice", "resp_1", NOW)  # known in memory: no read needed
    await ids.require("alice", {"previous_response_id": "resp_1"})
    await ids.require("alice", {"model": "m"})  # nothing to check
    for never_kept in ("", "a b", 'a"b', "a\x00b", "r" * 257):  # refused without a read
        with pytest.raises(ProxyError) as raised:
            await ids.require("alice", {"previous_response_id": never_kept})
        assert raised.value.code == "previous_response_not_found"


async def test_an_unknown_id_and_another_principals_get_the_same_answer() -> None:
    ids = ResponseIds(_Up())  # type: ignore[arg-type]
    ids.note("alice", "resp_a", NOW)
    answers = []
    for rid in ("resp_a", "resp_b"):
        with pytest.raises(ProxyError) as raised:
            await ids.require("bob", {"previous_response_id": rid})
        answers.append(raised.value.body()["error"] | {"message": None})
    assert answers[0] == answers[1]


class _Up(_Down):
    async def fetchrow(self, sql: str, params: tuple[Any, ...]) -> Any:
        return None


def test_the_memory_is_bounded_per_principal_and_in_all() -> None:
    lru = _Lru(per_principal=3, total=5)
    for i in range(4):
        lru.put("alice", f"a{i}", NOW)
    assert lru.get("alice", "a0") is None and len(lru) == 3  # Alice's oldest went
    lru.get("alice", "a1")  # used: now her most recent
    for i in range(3):
        lru.put("bob", f"b{i}", NOW)
    assert len(lru) == 5
    assert lru.get("alice", "a2") is None  # the one holding most (3 each: changed first) lost
    assert lru.get("alice", "a1") == NOW and lru.get("alice", "a3") == NOW
    assert [lru.get("bob", f"b{i}") for i in range(3)] == [NOW] * 3
    for i in range(5):
        lru.put("carol", f"c{i}", NOW)
    assert len(lru) == 5  # carol past two loses her own oldest, not another's
    assert [lru.get("carol", f"c{i}") for i in range(5)] == [None, None, None, NOW, NOW]
    assert [lru.get("bob", f"b{i}") for i in range(3)] == [None, NOW, NOW]
    assert [lru.get("alice", a) for a in ("a1", "a3")] == [None, NOW]
    lru.put("dave", "d0", NOW)
    lru.put("dave", "d1", NOW)
    assert len(lru) == 5 and len(lru._by) == 4
    assert "alice" in lru._by and lru.get("dave", "d1") == NOW
    for i in range(5):
        lru.put("erin", f"e{i}", NOW)  # one of five holding one: erin loses her own
    assert "alice" in lru._by and [lru.get("erin", f"e{i}") for i in range(5)][-1] == NOW
    two = _Lru(per_principal=3, total=2)
    for who in ("x", "y", "z"):  # each holds one: the one whose holding changed first loses
        two.put(who, "r", NOW)
    assert "x" not in two._by  # a principal with no id left takes no room


def test_one_principals_many_ids_do_not_push_anothers_out() -> None:
    """One tenant relaying id after id (up to its 1,000) pushed another's few ids out of the
    memory (a global LRU): its next continuation paid a store read (on PostgreSQL, with retries
    while the id may be queued). The principal holding most now loses its own oldest."""
    lru = _Lru(per_principal=1_000, total=20)
    lru.put("bob", "b0", NOW)
    lru.put("bob", "b1", NOW)
    for i in range(100):
        lru.put("alice", f"a{i}", NOW)
    assert lru.get("bob", "b0") == NOW and lru.get("bob", "b1") == NOW
    assert len(lru) == 20 and lru.get("alice", "a99") == NOW


def test_unverified_principals_ids_are_charged_to_their_lane() -> None:
    """Behind an upstream called with the server's key, made-up keys are answered (their ids
    kept), each a principal: 30 holding one id each would make a tenant holding two the
    heaviest. Unverified, they are charged together to their lane, and lose their own."""
    made_up = [f"pt-made-up-ids-{i}" for i in range(30)]
    for principal in made_up:
        charge_groups.unverified(principal, "unverified@10.9.9.9")
    try:
        lru = _Lru(per_principal=1_000, total=10)
        lru.put("bob", "b0", NOW)
        lru.put("bob", "b1", NOW)
        for principal in made_up:
            lru.put(principal, "r", NOW)
        assert lru.get("bob", "b0") == NOW and lru.get("bob", "b1") == NOW
        assert lru.get(made_up[-1], "r") == NOW and len(lru) == 10
    finally:
        for principal in made_up:
            charge_groups.verified(principal)


def test_the_memory_per_entry() -> None:
    """The docstring's figure: about 200 bytes an id, Python's containers included."""
    lru = _Lru(per_principal=1_000, total=10_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for p in range(10):
            for i in range(1_000):
                lru.put(f"key-{p:016x}", f"resp_{i:048x}", NOW + i)
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / len(lru)
    finally:
        tracemalloc.stop()
    assert 100 < per_entry < 500, per_entry


class _Noted:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def note(
        self, principal: str, rid: str, now: float | None = None, session: str | None = None
    ) -> None:
        self.seen.append((principal, rid))


def _recorder() -> tuple[Recorder, _Noted]:
    noted = _Noted()
    return Recorder(noted, "alice"), noted  # type: ignore[arg-type]


def test_a_stream_cut_anywhere_yields_its_id() -> None:
    data = b"".join(response_events(id="resp_" + "f" * 48))
    for size in (1, 2, 7, 64, 321, len(data)):
        recorder, noted = _recorder()
        for i in range(0, len(data), size):
            recorder.feed(data[i : i + size])
        assert noted.seen == [("alice", "resp_" + "f" * 48)], size
        assert recorder.done


def test_a_key_inside_a_string_is_not_the_responses() -> None:
    quoted = orjson.dumps({"response": {"id": "resp_fake"}}).decode()  # as text in a delta
    data = event("response.output_text.delta", delta=quoted) + b"".join(
        response_events(id="resp_real")
    )
    recorder, noted = _recorder()
    recorder.feed(data)
    assert noted.seen == [("alice", "resp_real")]


def test_a_stream_without_an_id_is_scanned_only_so_far() -> None:
    recorder, noted = _recorder()
    delta = event("response.output_text.delta", delta="x" * 60_000)
    fed = 0
    while not recorder.done:
        recorder.feed(delta)
        fed += len(delta)
    assert SCAN_LIMIT <= fed < SCAN_LIMIT + len(delta)
    recorder.feed(b"".join(response_events(id="resp_late")))  # too late: not looked for
    assert noted.seen == []


def test_a_whole_answers_id_is_read_wherever_it_is() -> None:
    recorder, noted = _recorder()
    recorder.answer(orjson.dumps(response_object(id="resp_1")))
    recorder.answer(b'{\n  "id": "resp_indented",\n  "object": "response"}')
    late = {"object": "response", "status": "completed", "id": "resp_late_key"}
    recorder.answer(orjson.dumps(late))
    recorder.answer(orjson.dumps({"object": "list", "id": "not_a_response"}))
    recorder.answer(b"not json")
    seen = [("alice", "resp_1"), ("alice", "resp_indented"), ("alice", "resp_late_key")]
    assert noted.seen == seen


def test_a_principal_verified_since_has_its_ids_charged_to_itself() -> None:
    charge_groups.unverified("pt-new-tenant", "unverified@10.9.9.8")
    try:
        lru = _Lru(per_principal=1_000, total=6)
        lru.put("pt-new-tenant", "r0", NOW)  # its first answer: kept in its lane's name
        charge_groups.verified("pt-new-tenant")
        lru.put("pt-new-tenant", "r1", NOW)  # accepted since: both its ids are its own
        assert lru._charged["pt-new-tenant"] == "pt-new-tenant"
        assert lru._holders["pt-new-tenant"].count == 2
        assert "unverified@10.9.9.8" not in lru._holders
        for i in range(10):
            lru.put("bob", f"b{i}", NOW)
        assert lru.get("pt-new-tenant", "r0") == NOW and len(lru) == 6
    finally:
        charge_groups.verified("pt-new-tenant")


def test_the_counts_stay_exact_through_random_puts() -> None:
    rng = random.Random(7)
    lru = _Lru(per_principal=5, total=40)
    for step in range(5_000):
        lru.put(f"p{rng.randrange(30)}", f"r{rng.randrange(12)}", NOW + step)
        held = sum(len(ids) for ids in lru._by.values())
        assert len(lru) == held <= 40
        assert sum(h.count for h in lru._holders.values()) == held
        assert all(len(ids) <= 5 for ids in lru._by.values())
