"""A window learned from a "prompt too long" answer holds the principal's later requests of the
model (and on every replica, through the store), never another principal's: an upstream's error
can quote the request's own text (OpenAI's "Unrecognized request argument supplied: …" names the
argument), so a tenant could state any window. It is bounded too: the window as the upstream
stated it, never scaled by one request's count, and never below the floor (half the model's known
window, else ``MIN_LEARNED_WINDOW``), also when read back from the store. The proxy's own count
sees media parts (``rules.media``). The model's name is stored redacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson

from proxy.principals import split_scoped
from proxy.rewrite.engine import Engine
from proxy.rewrite.model_windows import MIN_LEARNED_WINDOW, LearnedWindows
from proxy.settings import Settings, settings_from_mapping
from proxy.store import learned_windows
from proxy.store.sqlite import Store
from rules.redact import redact_text
from tests.conftest import in_process, log_rows, proxy_settings
from tests.support.edge_upstream import EdgeUpstream, Reply
from tests.support.factories import assistant, chat_completion, result, shell, system, user

MODEL = "gpt-4o"  # 128,000 tokens in litellm's table
STATED = 128_000
RESERVE = 8_000  # pipeline.output_reserve_tokens' default
NOW = 1_800_000_000.0


def overflow(window: int, prompt: int) -> Reply:
    message = (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "param": "messages"}
    return Reply.json({"error": {**error, "code": "context_length_exceeded"}}, status=400)


def screenshots(n: int) -> list[dict[str, Any]]:
    """One message of ``n`` screenshots, as an agent sends them."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    return [{"role": "user", "content": [{"type": "text", "text": "What changed?"}] + [image] * n}]


def conversation() -> list[dict[str, Any]]:
    """A normal coding conversation of 44 messages (~4k tokens)."""
    messages = [system(), user("Find where the config is parsed and fix the off-by-one.")]
    for i in range(20):
        messages.append(assistant(None, shell(f"call_{i}", f"sed -n 1,40p src/part_{i}.py")))
        body = "\n".join(f"line {j}: value_{i}_{j} = parse(field[{j}])" for j in range(12))
        messages.append(result(f"call_{i}", body))
    messages += [assistant("Found it in part_7."), user("Good, fix it.")]
    assert len(messages) == 44
    return messages


async def post(client: httpx.AsyncClient, key: str, body: dict[str, Any]) -> httpx.Response:
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    return await client.post("/v1/chat/completions", content=orjson.dumps(body), headers=headers)


async def row(client: httpx.AsyncClient, response: httpx.Response) -> dict[str, Any]:
    request_id = response.headers["x-ctxproxy-request-id"]
    return next(r for r in await log_rows(client) if r["id"] == request_id)


async def stored(client: httpx.AsyncClient) -> list[tuple[str, str, int]]:
    store = client.app.state.services.store  # type: ignore[attr-defined]
    await store.flush()
    rows = await store.fetchall("SELECT upstream, model, window_tokens FROM learned_windows", ())
    return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]


async def principal_of(client: httpx.AsyncClient, response: httpx.Response) -> str:
    return split_scoped((await row(client, response))["session_id"])[0]


async def test_a_normal_conversation_is_forwarded_whole_after_an_image_heavy_overflow(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    # the provider counted 4,000 tokens an image: more than the proxy's estimate, so the ratio of
    # the two counts is below 1 even with the images counted
    edge.replies = [overflow(STATED, 600_000)]
    edge.reply = Reply.json(chat_completion("ok"))
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        first = await post(client, "sk-client-a", {"model": MODEL, "messages": screenshots(150)})
        assert first.status_code == 400  # the upstream's own answer: no retry could fit
        rescue = (await row(client, first))["report"]["rescue"]
        # the ratio of the counts applied to that request's retry only
        assert rescue["learned"] == STATED and rescue["budget"] < (STATED - RESERVE) / 2
        assert await stored(client) == [("fake", MODEL, STATED)]  # as stated, never scaled

        messages = conversation()
        second = await post(client, "sk-client-b", {"model": MODEL, "messages": messages})
        assert second.status_code == 200
        forwarded = edge.seen[-1].json()["messages"]
        assert len(forwarded) == 44 and forwarded[:-1] == messages[:-1]  # inject's tail aside
        report = (await row(client, second))["report"]
        assert report["tokens"]["budget"] == STATED - RESERVE and "rescue" not in report


async def test_the_proxy_counts_the_images_it_forwards(tmp_path: Path, edge: EdgeUpstream) -> None:
    """150 screenshots are no 10-token message: the log row's count holds their estimate."""
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await post(client, "sk-client-a", {"model": MODEL, "messages": screenshots(150)})
        assert r.status_code == 200
        logged = await row(client, r)
        assert logged["tokens_before"] >= 150 * 1_600
        assert logged["sections"]["user"]["before"] >= 150 * 1_600


async def test_a_key_shaped_model_name_is_stored_redacted(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    key = "sk-proj-Abcdefgh1234567890Abcdefgh1234567890"
    edge.replies = [overflow(50_000, 60_000)]
    async with in_process(proxy_settings(edge.base_url), str(tmp_path / "db")) as client:
        r = await post(client, "sk-client-a", {"model": key, "messages": [user("hi " * 200)]})
        assert r.status_code in (200, 400)
        rows = await stored(client)
        assert rows == [("fake", redact_text(key), 50_000)]
        assert key not in repr(rows) and "Abcdefgh1234567890" not in repr(rows)


def _settings() -> Settings:
    upstream = {"name": "fake", "match": ["*"], "base_url": "http://upstream.test/v1"}
    return settings_from_mapping({"upstreams": [upstream]})


async def test_windows_below_the_floor_are_raised_when_learned_and_when_loaded(
    tmp_path: Path,
) -> None:
    store = Store(str(tmp_path / "s.db"))
    await store.open()
    try:
        # rows an older version stored from one image-heavy request: 7 tokens
        learned_windows.save(store, "alice", "fake", MODEL, 7, NOW)
        learned_windows.save(store, "alice", "fake", "my-local-model", 7, NOW)
        await store.flush()
        engine = Engine(_settings(), store)
        assert await engine.recall_windows(NOW + 1) == 2
        assert engine.learned.get("alice", "fake", MODEL) == STATED // 2  # half the known window
        assert engine.learned.get("alice", "fake", "my-local-model") == MIN_LEARNED_WINDOW
        assert engine.budget_for(MODEL, "alice") == STATED // 2 - RESERVE
        # and when learned now: the floor, for the principal; only a retry goes below it
        fresh = Engine(_settings(), store)
        assert fresh.learn_window(MODEL, 7, "alice") == STATED // 2
        assert fresh.budget_for(MODEL, "alice") == STATED // 2 - RESERVE
        assert fresh.budget_under(MODEL, 3_000, 1.0, "alice") == 256  # 3,000 less the reserve
        assert fresh.budget_for(MODEL, "bob") == STATED - RESERVE
    finally:
        await store.close()


def quoting(argument: str) -> Reply:
    """OpenAI's answer to a request carrying an argument it does not know: it names it."""
    message = f"Unrecognized request argument supplied: {argument}"
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return Reply.json({"error": error}, status=400)


async def test_a_window_stated_in_a_tenants_own_text_never_holds_another_tenant(
    tmp_path: Path, edge: EdgeUpstream
) -> None:
    injected = "maximum context length is 4096 tokens"
    big = [system(), user("word " * 85_000), *conversation()[1:]]  # ~89k tokens
    edge.reply = Reply.json(chat_completion("ok"))
    settings = proxy_settings(edge.base_url)
    async with in_process(settings, str(tmp_path / "db")) as client:
        edge.replies = [quoting(injected)]  # nothing to compact: no retry
        tiny = {"model": MODEL, "messages": [user("hi")], injected: 1}
        attack = await post(client, "sk-client-a", tiny)
        assert attack.status_code == 400 and injected.encode() in edge.seen[-1].body
        attacker = await principal_of(client, attack)
        assert await stored(client) == [("fake", MODEL, STATED // 2)]  # its own, at the floor

        victim = await post(client, "sk-client-b", {"model": MODEL, "messages": big})
        assert victim.status_code == 200
        report = (await row(client, victim))["report"]
        assert report["tokens"]["budget"] == STATED - RESERVE
        assert edge.seen[-1].json()["messages"][:-1] == big[:-1]  # nothing pruned

        again = await post(client, "sk-client-a", {"model": MODEL, "messages": big})
        assert (await row(client, again))["report"]["tokens"]["budget"] == STATED // 2 - RESERVE
    # and read back from the store (a restart, another replica): still the attacker's only
    async with in_process(settings, str(tmp_path / "db")) as client:
        engine = client.app.state.services.engine  # type: ignore[attr-defined]
        assert engine.budget_for(MODEL, attacker) == STATED // 2 - RESERVE
        victim = await post(client, "sk-client-b", {"model": MODEL, "messages": big})
        assert (await row(client, victim))["report"]["tokens"]["budget"] == STATED - RESERVE


def test_the_principal_holding_most_learned_windows_loses_its_oldest_first() -> None:
    """One tenant's 1,100 windows under made-up model names (each a cheap 400 of the catch-all
    upstream) pushed another tenant's one learned window out of the 1,024 kept: its next long
    request met the provider's overflow again."""

    windows = LearnedWindows(max_entries=8)
    windows.learn("bob", "openai", "bobmodel-1", 5_000)
    for i in range(20):
        windows.learn("alice", "openai", f"made-up-{i}", 5_000)
    assert windows.get("bob", "openai", "bobmodel-1") == 5_000
    assert windows.get("alice", "openai", "made-up-19") == 5_000
    assert windows.get("alice", "openai", "made-up-0") is None  # her oldest went
    assert sum(windows.get("alice", "openai", f"made-up-{i}") is not None for i in range(20)) == 7


def test_made_up_keys_windows_are_charged_to_their_lane() -> None:
    """In passthrough before a keyless upstream (a local vLLM), a network's made-up keys past the
    ones accepted stay unverified: charged each to itself, 20 of them holding one window each
    tied with a tenant's one, and the tenant's, the oldest, went first. Charged to their lane
    (``proxy.charge_groups``), as the shared maps charge them, they lose their own."""
    from proxy import charge_groups

    made_up = [f"pt-made-up-{i}" for i in range(20)]
    for principal in made_up:
        charge_groups.unverified(principal, "unverified@10.9.9.9")
    try:
        windows = LearnedWindows(max_entries=8)
        windows.learn("pt-tenant", "openai", "gpt-4o", 5_000)
        for principal in made_up:
            windows.learn(principal, "openai", "gpt-4o", 5_000)
        assert windows.get("pt-tenant", "openai", "gpt-4o") == 5_000
        assert windows.get(made_up[-1], "openai", "gpt-4o") == 5_000
        assert sum(windows.knows(p) for p in made_up) == 7
    finally:
        for principal in made_up:
            charge_groups.verified(principal)
