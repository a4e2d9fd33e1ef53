"""A Gemini model turn's signed call stays in place through the chain repair.

Gemini's rule (ai.google.dev/gemini-api/docs/thought-signatures): with parallel calls only the
first ``functionCall`` part of a response carries the ``thoughtSignature``; it must come back "in
the exact part where it was received", and in the current turn "the first functionCall part in
each step" must carry its signature, else Gemini 3 answers 400 ("Function call is missing a
thought_signature in functionCall parts"). A runaway turn (more unanswered calls than
``max_synthetic_results``) leaves its unanswered calls out: the signed call must not be one of
them, or the turn's first call forwarded is unsigned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.protocols.gemini_checks import pairing_violations
from proxy.rewrite.engine import Engine
from tests.conftest import in_process
from tests.proxy.protocols.test_gemini_adapter import (
    SIG,
    body,
    call,
    model,
    preamble,
    response,
    rewrite,
    user,
)
from tests.support.gemini_proxy import gemini_settings
from tests.support.gemini_upstream import pairing_break, signature_break, start_gemini_upstream
from tests.support.strict_engine import strict_engine


@pytest.fixture
async def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    async with strict_engine(tmp_path) as eng:
        yield eng


def steps_unsigned(contents: list[dict[str, Any]]) -> list[int]:
    """The model contents whose first ``functionCall`` part has no ``thoughtSignature``."""
    out = []
    for i, content in enumerate(contents):
        calls = [p for p in content["parts"] if "functionCall" in p]
        if content["role"] == "model" and calls and "thoughtSignature" not in calls[0]:
            out.append(i)
    return out


async def test_a_runaway_turn_keeps_its_signed_call_answered(engine: Engine) -> None:
    calls = [call(f"c{k}", f"cmd{k}", SIG if k == 1 else None) for k in range(1, 21)]
    b = body(user(preamble(), "make a folder"), model("Running them.", *calls),
             user(response("c20", "twenty")))  # fmt: skip
    assert steps_unsigned(b["contents"]) == []
    out = await rewrite(engine, b)
    contents = out.body["contents"]
    assert pairing_violations(contents) == []
    assert steps_unsigned(contents) == []
    turn = contents[1]
    assert turn["parts"][1] == calls[0]  # the signed call, byte for byte, in its place
    answered = [p["functionResponse"] for p in contents[2]["parts"] if "functionResponse" in p]
    assert [r["id"] for r in answered] == ["c1", "c20"]
    assert "interrupted" in answered[0]["response"]["output"]
    assert answered[1]["response"] == {"output": "twenty"}
    runaway = [r for r in out.report["repairs"] if r["kind"] == "runaway_turn"]
    assert [r["count"] for r in runaway] == [18]  # c2 … c19 left out, in one note



async def test_a_runaway_turn_through_the_proxy_is_accepted_by_a_signature_checking_upstream(
    tmp_path: Path,
) -> None:
    """Live: the app in front of the scripted Gemini upstream holding requests to the pairing
    rule and to Gemini 3's signature rule (``require_signatures``). The client's request breaks
    the pairing rule; what the proxy forwards breaks neither."""
    upstream = start_gemini_upstream()
    upstream.require_signatures = True
    calls = [call(f"c{k}", f"cmd{k}", SIG if k == 1 else None) for k in range(1, 21)]
    b = body(user(preamble(), "make a folder"), model("Running them.", *calls),
             user(response("c20", "twenty")))  # fmt: skip
    assert signature_break(b["contents"]) is None and pairing_break(b["contents"]) is not None
    headers = {"x-goog-api-key": "k", "content-type": "application/json"}
    try:
        async with in_process(gemini_settings(upstream.url), str(tmp_path / "db")) as client:
            answer = await client.post(
                "/v1beta/models/gemini-3.8-flash:generateContent",
                content=orjson.dumps(b), headers=headers,
            )  # fmt: skip
        assert answer.status_code == 200, answer.text
        forwarded = upstream.last.json
        assert forwarded is not None
        assert pairing_break(forwarded["contents"]) is None
        assert signature_break(forwarded["contents"]) is None
        assert orjson.dumps(calls[0]) in upstream.last.raw  # its signature, in its part
    finally:
        upstream.stop()
