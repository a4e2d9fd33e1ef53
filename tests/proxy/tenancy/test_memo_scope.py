"""The proxy's cross-request memos (token counts, lowerings, lifts, message records, the rules'
text memos) are keyed by content. Shared by every principal, a request for a text another tenant
sent before is answered from that tenant's entries, faster than a miss: a tenant could time a
guess of another's exact content. Each principal's requests hit only what that principal sent.

Observed without a clock: the tokenizer is called for a text on a miss only, so principal B's
request for the very body principal A sent must be counted afresh, while A's own resend is not.
A body past the offload threshold checks that the scope goes with the work into the worker
thread."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import proxy.tokens
from proxy.app import create_app
from proxy.rewrite.engine import OFFLOAD_BYTES
from proxy.tokens import TiktokenCounter
from rules.memo_scope import enter_scope, memo_scope
from rules.text_cache import ENTRY_CHARS, charge, text_cache
from tests.proxy.tenancy.conversations import MODELS, PROTOCOLS
from tests.proxy.tenancy.serving import KEY_A, KEY_B, Served, tenancy_settings
from tests.support.edge_upstream import EdgeUpstream
from tests.support.live import serve_in_thread, stop


def in_scope(principal: str, fn: Callable[[], Any]) -> Any:
    """``fn()`` as a request of ``principal`` runs it: in a context of its own."""

    def run() -> Any:
        enter_scope(principal)
        return fn()

    return contextvars.copy_context().run(run)


def test_outside_a_request_the_scope_is_empty() -> None:
    assert memo_scope() == ""
    assert in_scope("pt-a", memo_scope) == "pt-a"
    assert memo_scope() == ""  # a request's scope stays in its own context


def test_a_text_memo_serves_each_principal_its_own_entries() -> None:
    calls: list[str] = []

    @text_cache(max_chars=10_000)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    assert in_scope("pt-a", lambda: upper("secret plan")) == "SECRET PLAN"
    assert in_scope("pt-a", lambda: upper("secret plan")) == "SECRET PLAN"
    assert calls == ["secret plan"]  # A's second call: a hit
    assert in_scope("pt-b", lambda: upper("secret plan")) == "SECRET PLAN"
    assert calls == ["secret plan", "secret plan"]  # B's: computed again, not A's entry
    entry = len("secret plan") + ENTRY_CHARS + charge("SECRET PLAN")  # text, itself, value
    assert upper.cache_chars() == 2 * entry


def test_the_reference_scans_last_text_is_its_principals(monkeypatch: pytest.MonkeyPatch) -> None:
    """resolve_refs keeps the text it last prepared (one slot): another principal's same text is
    prepared anew, never the first's entry."""
    from rules.entities import ref_read

    prepared: list[str] = []
    real = ref_read.prepare

    def spy(text: str, *args: Any) -> Any:
        prepared.append(text)
        return real(text, *args)

    monkeypatch.setattr(ref_read, "prepare", spy)
    monkeypatch.setattr(ref_read, "_last_prepared", None)
    text = "delete the folder I just created for the alpha launch"

    def prep() -> Any:
        return ref_read._prepared(text, (), ("en",))

    first = in_scope("pt-a", prep)
    assert in_scope("pt-a", prep) is first and prepared == [text]
    in_scope("pt-b", prep)
    assert prepared == [text, text]


def test_a_token_count_is_memoised_per_principal(monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[str] = []
    real = proxy.tokens.count_guarded

    def spy(encode: Any, text: str, name: str) -> tuple[int, bool]:
        counted.append(text)
        return real(encode, text, name)

    monkeypatch.setattr(proxy.tokens, "count_guarded", spy)
    counter = TiktokenCounter("cl100k_base")
    text = "the deploy key lives in vault path kv/prod/alpha " * 20
    a = in_scope("pt-a", lambda: counter.count_text(text))
    assert in_scope("pt-a", lambda: counter.count_text(text)) == a
    assert counted == [text]
    assert in_scope("pt-b", lambda: counter.count_text(text)) == a  # the same count...
    assert counted == [text, text]  # ...from B's own miss
    tools = [{"type": "function", "function": {"name": "deploy", "parameters": {}}}]
    in_scope("pt-a", lambda: counter.count_tools(list(tools)))
    schema_calls = len(counted)
    in_scope("pt-a", lambda: counter.count_tools(list(tools)))
    assert len(counted) == schema_calls  # a new list of the same schemas: A's entry
    in_scope("pt-b", lambda: counter.count_tools(list(tools)))
    assert len(counted) == schema_calls + 1


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    edge = EdgeUpstream().start()
    db = str(Path(tmp_path_factory.mktemp("memo_scope")) / "proxy.db")
    server, base = serve_in_thread(
        create_app(tenancy_settings(edge, "passthrough"), db_path=db, strict=True)
    )
    proxy = Served(base, edge, "sqlite-passthrough")
    try:
        yield proxy
    finally:
        proxy.client.close()
        stop(server)
        edge.stop()


def body_for(proto: str, text: str) -> dict[str, Any]:
    """A one-turn request of ``proto`` whose user message is ``text``."""
    model = MODELS[proto]
    if proto == "messages":
        return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}]}
    if proto == "responses":
        return {"model": model, "input": [{"role": "user", "content": text}]}
    return {"model": model, "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("size", ["inline", "offloaded"])
@pytest.mark.parametrize("proto", PROTOCOLS)
def test_another_principal_never_hits_what_one_sent(
    served: Served, monkeypatch: pytest.MonkeyPatch, proto: str, size: str
) -> None:
    marker = f"zq-{proto}-{size}-"
    repeat = 2 * OFFLOAD_BYTES // len(marker) if size == "offloaded" else 40
    text = "the staging password rotates on fridays " + marker * repeat
    counted: list[str] = []
    real = proxy.tokens.count_guarded

    def spy(encode: Any, piece: str, name: str) -> tuple[int, bool]:
        if marker in piece:
            counted.append(piece)
        return real(encode, piece, name)

    monkeypatch.setattr(proxy.tokens, "count_guarded", spy)
    served.post(proto, body_for(proto, text), KEY_A)
    first = len(counted)
    assert first > 0  # A's text was new: counted
    served.post(proto, body_for(proto, text), KEY_A)
    assert len(counted) == first  # A's resend: its own entries
    served.post(proto, body_for(proto, text), KEY_B)
    assert len(counted) == 2 * first  # B's: counted afresh, not answered from A's entries


def test_no_pattern_is_compiled_for_a_name_a_request_said(tmp_path: Path) -> None:
    # a name said beside a noun ("the container running zqkv") and a name ruled out ("not the
    # zqkv one") are searched for without compiling a pattern for them: ``re`` keeps what it
    # compiled in one cache for every principal, so another tenant's request for the same name
    # would be answered faster
    import re

    from tests.support.scenarios import load, run

    steps = """
    - {shell: "docker run -d --name kv zqkv:7", exit: 0, output: "3f9a1c2b7d4e"}
    - {shell: "docker run -d --name db postgres:16", exit: 0, output: "8e7d6c5b4a39"}"""
    (tmp_path / "s.yaml").write_text(
        f"""
- id: detail
  lang: en
  class: detail
  cwd: /srv/app
  steps: {steps}
  ask: stop the container running zqkv
  expect: {{kind: container, id: kv}}
- id: ruled_out
  lang: en
  class: negation
  cwd: /srv/app
  steps:
    - {{shell: "docker run -d --name zqkvx redis:7", exit: 0, output: "3f9a1c2b7d4e"}}
  ask: stop the container you started, not the zqkvx one
  expect: {{abstain: true, why: ruled out}}
""",
        encoding="utf-8",
    )
    for scenario in load(tmp_path / "s.yaml"):
        outcome = run(scenario)
        assert outcome.passed, outcome.describe()
    compiled = [key for key in re._cache if "zqkv" in str(key)]  # type: ignore[attr-defined]
    assert compiled == []
