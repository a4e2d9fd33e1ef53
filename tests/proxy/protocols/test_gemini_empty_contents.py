"""A content without parts (``parts: []``, or none at all) is refused by Gemini with a 400
("contents.parts must not be empty"): a client saves one when a turn ends with no output (a
``MALFORMED_FUNCTION_CALL``) or a user sends nothing. A model content is forwarded with a note
that it was empty, a user content with "(empty)"; the others stay the client's own."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.rewrite.engine import Engine
from tests.proxy.protocols.test_gemini_adapter import body, model, rewrite, user


@pytest.mark.parametrize("empty", [{"parts": []}, {}, {"parts": None}])
@pytest.mark.parametrize("role", ["model", "user"])
async def test_a_content_without_parts_gets_one(
    engine: Engine, role: str, empty: dict[str, Any]
) -> None:
    contents = [user("fix the bug"), model("on it"), user("go on")]
    at = 1 if role == "model" else 2
    contents[at] = {"role": role, **empty}
    b = body(*contents, model("done"), user("thanks"))
    out = await rewrite(engine, b)
    forwarded = out.body["contents"]
    assert all(c.get("parts") for c in forwarded)
    assert forwarded[at]["role"] == role
    said = forwarded[at]["parts"][0]["text"]
    assert said == ("(empty)" if role == "user" else "[ctxproxy: empty model turn]")
    for i in (0, 3, 4):  # the others as sent
        assert orjson.dumps(forwarded[i]) == orjson.dumps(b["contents"][i])
