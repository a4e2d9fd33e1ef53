"""Every request has a principal: a keyed hash of the credential in passthrough, a configured name
or a keyed hash of the proxy key in keys mode, ``anonymous`` without a credential."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from proxy.errors import Unauthorized
from proxy.principals import (
    ANONYMOUS,
    KNOWN_CREDENTIALS,
    Principals,
    credential,
    credentials,
    scoped,
    split_scoped,
)
from proxy.settings import AuthSettings, SettingsError, settings_from_mapping
from tests.conftest import in_process, proxy_settings

SECRET = b"s" * 32


def test_passthrough_names_each_credential_by_a_keyed_hash() -> None:
    p = Principals(AuthSettings(), SECRET)
    a = p.of({"authorization": "Bearer sk-alice"})
    assert a.startswith("pt-") and "sk-alice" not in a
    assert p.of({"x-api-key": "sk-alice"}) == a  # the same credential, another header
    assert p.of({"authorization": "Bearer sk-bob"}) != a
    assert p.of({}) == ANONYMOUS and p.of({"authorization": "Basic x"}) == ANONYMOUS
    # another server secret names the same key differently: the name tells nothing of the key
    assert Principals(AuthSettings(), b"t" * 32).of({"x-api-key": "sk-alice"}) != a


def test_keys_mode_names_keys_and_refuses_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPROXY_KEYS", "k-plain")
    monkeypatch.setenv("ALICE_OLD", "k-alice-1")
    monkeypatch.setenv("ALICE_NEW", "k-alice-2, k-alice-3")
    settings = AuthSettings(mode="keys", principals={"alice": ["ALICE_OLD", "ALICE_NEW"]})
    p = Principals(settings, SECRET)
    assert p.key_count == 4
    # rotation: every key of a name is the same principal
    for key in ("k-alice-1", "k-alice-2", "k-alice-3"):
        assert p.of({"authorization": f"Bearer {key}"}) == "alice"
    plain = p.of({"x-api-key": "k-plain"})
    assert plain.startswith("key-") and "k-plain" not in plain
    for headers in ({}, {"authorization": "Bearer nope"}, {"x-api-key": "k-alice"}):
        with pytest.raises(Unauthorized):
            p.of(headers)


def test_a_kept_principal_is_the_one_hashing_gives_and_the_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXPROXY_KEYS", ",".join(f"k-{i}" for i in range(KNOWN_CREDENTIALS + 40)))
    for settings in (AuthSettings(), AuthSettings(mode="keys")):
        kept, fresh = Principals(settings, SECRET), Principals(settings, SECRET)
        hashed: list[str] = []
        monkeypatch.setattr(
            kept, "_digest", lambda v, d=kept._digest, seen=hashed: seen.append(v) or d(v)
        )
        # more credentials than are kept, each twice in a row, then all again (the oldest gone)
        order = [f"k-{i}" for i in range(KNOWN_CREDENTIALS + 40) for _ in (0, 1)]
        order += [f"k-{i}" for i in range(KNOWN_CREDENTIALS + 40)]
        for key in order:
            headers = {"authorization": f"Bearer {key}"}
            assert kept.of(headers) == Principals(settings, SECRET).of(headers) == fresh.of(headers)
        # hashed on first sight only; the last pass finds each let go by the bound (the oldest
        # goes first), so without the memory it would be three times each
        assert len(hashed) == 2 * (KNOWN_CREDENTIALS + 40)
        assert len(kept._known) == KNOWN_CREDENTIALS
        # a refused key is refused every time, and never kept
        keys_mode = settings.mode == "keys"
        for _ in range(2):
            with pytest.raises(Unauthorized) if keys_mode else contextlib.nullcontext():
                kept.of({"x-api-key": "k-unknown"})
        assert ("k-unknown" in kept._known) == (settings.mode == "passthrough")


@pytest.mark.parametrize("name", ["anonymous", "legacy", "pt-x", "key-x", "a/b", "", "-x"])
def test_reserved_or_malformed_principal_names_fail_at_start(name: str) -> None:
    with pytest.raises(SettingsError, match="principal"):
        settings_from_mapping({"auth": {"mode": "keys", "principals": {name: ["ENV"]}}})


def test_scoped_keys_split_at_the_principal() -> None:
    key = scoped("alice", "conv/with/slashes")
    assert key == "alice/conv/with/slashes"
    assert split_scoped(key) == ("alice", "conv/with/slashes")
    assert credential({"authorization": "bearer  tok "}) == "tok"


async def test_keys_mode_without_a_key_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CTXPROXY_KEYS", raising=False)
    settings = proxy_settings(
        "http://127.0.0.1:9/v1",
        auth={"mode": "keys"},
        upstreams=[{"name": "u", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "UP"}],
    )
    with pytest.raises(SettingsError, match="no proxy key"):
        async with in_process(settings, str(tmp_path / "db")):
            pass


async def test_the_server_secret_is_made_once_and_kept_with_the_store(tmp_path: Path) -> None:
    from proxy.store.secrets import server_secret
    from proxy.store.sqlite import SQLiteStore

    async def secret_of(path: Path) -> bytes:
        store = SQLiteStore(str(path))
        await store.open()
        try:
            return await server_secret(store)
        finally:
            await store.close()

    first = await secret_of(tmp_path / "a.db")
    assert len(first) == 32
    assert await secret_of(tmp_path / "a.db") == first  # a restart names every key alike
    assert await secret_of(tmp_path / "b.db") != first


def test_passthrough_counts_every_credential_presented() -> None:
    """A native Messages upstream is sent both a bearer and an ``x-api-key``, and may read
    either: two clients sharing one of them but not the other are two principals."""
    p = Principals(AuthSettings(), SECRET)
    shared_bearer = {"authorization": "Bearer team-gateway-token"}
    alice = p.of({**shared_bearer, "x-api-key": "sk-ant-alice"}, every=True)
    bob = p.of({**shared_bearer, "x-api-key": "sk-ant-bob"}, every=True)
    assert alice != bob
    assert p.of(shared_bearer, every=True) not in (alice, bob)
    # the same credentials in other headers, or the same one twice, are the same principal
    swapped = {"authorization": "Bearer sk-ant-alice", "x-api-key": "team-gateway-token"}
    assert p.of(swapped, every=True) == alice
    both = {"authorization": "Bearer k", "x-api-key": "k"}
    assert (
        p.of(both, every=True) == p.of({"x-api-key": "k"}, every=True) == p.of({"x-api-key": "k"})
    )
    assert credentials({"authorization": "Bearer a", "api-key": "b"}) == '["a","b"]'


def test_on_the_messages_relay_any_scheme_and_any_credential_header_counts() -> None:
    """The Messages relay sends every client header, so a gateway may authenticate by a
    ``Basic`` authorization or a key header of its own: two such clients were both
    ``anonymous`` and read each other's sessions."""
    p = Principals(AuthSettings(), SECRET)
    alice = p.of({"authorization": "Basic YWxpY2U6cw=="}, every=True)
    mallory = p.of({"authorization": "Basic bWFsbG9yeTpl"}, every=True)
    assert ANONYMOUS not in (alice, mallory) and alice != mallory
    portkey = [p.of({"x-portkey-api-key": k, "anthropic-version": "2023-06-01"}, every=True)
               for k in ("pk-1", "pk-2")]  # fmt: skip
    assert portkey[0] != portkey[1] and ANONYMOUS not in portkey
    # headers that name no credential, or change on every request, do not count
    plain = {"x-api-key": "k", "anthropic-version": "2023-06-01", "user-agent": "claude-cli/2"}
    assert p.of({**plain, "idempotency-key": "stainless-retry-1"}, every=True) == p.of(
        {"x-api-key": "k"}, every=True
    )
    assert p.of({**plain, "x-claude-code-session-id": "s1"}, every=True) == p.of(plain)


def test_elsewhere_a_header_the_upstream_is_not_sent_does_not_count() -> None:
    """Chat, Responses and Gemini upstreams get one credential: a junk ``x-api-key`` beside a
    bearer made a new principal (and a lane of its own) per value."""
    p = Principals(AuthSettings(), SECRET)
    bearer = {"authorization": "Bearer sk-proj-alice"}
    assert p.of({**bearer, "x-api-key": "junk-1"}) == p.of({**bearer, "x-api-key": "junk-2"})
    assert p.of({**bearer, "x-api-key": "junk-1"}) == p.of(bearer)
    # Gemini: the key as its upstream reads it, whatever bearer goes beside it
    assert p.of({"authorization": "Bearer x"}, "AIza-carol") == p.of({}, "AIza-carol")


def test_on_the_messages_relay_a_header_never_sent_or_new_each_request_does_not_count() -> None:
    """Only what the relay sends upstream authenticates there: a cookie (the proxy's own /ui
    session), ``x-forwarded-authorization``, ``proxy-authorization``, a header ``Connection``
    names, and an idempotency key new on every request each made one client a principal per
    request, so a session's state was never found again."""
    p = Principals(AuthSettings(), SECRET)
    plain = {"x-api-key": "sk-ant-alice", "anthropic-version": "2023-06-01"}
    alice = p.of(plain, every=True)
    for extra in (
        {"cookie": "ctxproxy_ui=abc"},
        {"x-forwarded-authorization": "Bearer rotating-1"},
        {"proxy-authorization": "Basic cHJveHk6cw=="},
        {"connection": "keep-alive, x-hop-token", "x-hop-token": "per-hop"},
        {"x-stainless-idempotency-key": "stainless-node-retry-5f1e"},
        {"x-ctxproxy-token": "ours"},
    ):
        assert p.of({**plain, **extra}, every=True) == alice, extra
    # what the relay does send still counts
    assert p.of({**plain, "x-gateway-token": "g1"}, every=True) != alice
