"""The corpus invariants (``bench/protocol_invariants.py``) for Gemini ``generateContent``: the
fixed traces of ``test_protocol_invariants``, converted as Gemini CLI would send them
(``bench/protocol_convert_gemini.py``), get the rules' chat decisions (repairs, entities,
pruning) and every forwarded body passes Gemini's pairing rule; the corpus's broken chains (cut
mid-turn, unanswered calls, orphans) come out valid. A disagreement is allowed only in a class
documented as expected."""

from __future__ import annotations

import asyncio
import copy
import itertools

import pytest

from bench.protocol_convert_gemini import gemini_view, to_gemini
from bench.protocol_invariants import ALL_DIMENSIONS, EXPECTED, VARIANTS, run_variant
from proxy.protocols.validate import validate_gemini
from tests.support.traces import iter_conversations
from tests.test_protocol_invariants import TRACES

pytestmark = pytest.mark.needs_shared


@pytest.fixture(scope="module")
def conversations() -> list[dict]:
    wanted = set(TRACES)
    found = [c for c in iter_conversations() if c["id"] in wanted]
    assert {c["id"] for c in found} == wanted
    return found


@pytest.mark.parametrize("variant", ["defaults", "budget-8k"])
def test_gemini_decisions_agree_with_chat(conversations: list[dict], variant: str) -> None:
    results = asyncio.run(run_variant(VARIANTS[variant], conversations, ("gemini",), "developer"))
    unexplained = {
        (r.conv_id, cls): r.examples
        for r in results
        for (_, cls) in r.classes
        if cls not in EXPECTED
    }
    assert not unexplained, unexplained
    for r in results:
        assert r.steps > 0
        assert r.agree["gemini", "integrity"] == r.steps, r.conv_id
        if not r.classes:
            assert all(r.agree["gemini", d] == r.steps for d in ALL_DIMENSIONS), r.conv_id


def test_converter_keeps_ids_names_and_turns(conversations: list[dict]) -> None:
    for conv in conversations:
        chat = {"model": "gemini-2.5-flash", "messages": conv["messages"]}
        before = copy.deepcopy(chat)
        done = to_gemini(chat)
        assert chat == before
        validate_gemini(done.body)
        assert not done.losses
        parts = [p for c in done.body["contents"] for p in c["parts"]]
        call_ids = [c["id"] for m in conv["messages"] for c in m.get("tool_calls") or []]
        result_ids = [m["tool_call_id"] for m in conv["messages"] if m["role"] == "tool"]
        assert [p["functionCall"]["id"] for p in parts if "functionCall" in p] == call_ids
        responses = [p["functionResponse"] for p in parts if "functionResponse" in p]
        assert [r["id"] for r in responses] == result_ids
        roles = [c["role"] for c in done.body["contents"]]
        assert all(a != b for a, b in itertools.pairwise(roles))  # turns alternate
        view = gemini_view(done.body["contents"])
        assert gemini_view(view) == view and len(view) == len(roles)
