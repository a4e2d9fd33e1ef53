"""Tier 3, a real agent: Gemini CLI 0.61.0 reads a picture through a live proxy. To Gemini 2.5 the
CLI sends the image as an ``inlineData`` part right after the function response, which the proxy
forwards as sent and counts at an image's estimate, as the result's (to a Gemini 3 model this CLI
sends the response's text alone: its ``functionResponse.parts`` do not reach the wire).

Installed by ``bin/test`` (npm); without it these tests skip with the reason."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson

from rules.media import IMAGE_TOKENS
from tests.support.agent_clis import Gemini
from tests.support.agent_proxy import completed_rows
from tests.support.gemini_upstream import last_has_response
from tests.support.pictures import PNG, picture
from tests.support.protocol_upstreams import Block, Seen, Turn, text


def read_then_text(path: Path, final: str) -> Any:
    def respond(seen: Seen) -> Turn:
        if last_has_response(seen):
            return Turn([text(final)])
        call = Block("tool", name="read_file", input={"file_path": str(path)})
        return Turn([text("Let me look."), call])

    return respond


def test_a_read_image_is_forwarded_and_counted(gemini_proxy, gemini_upstream, tmp_path):  # type: ignore[no-untyped-def]
    proxy = gemini_proxy()
    gemini_upstream.reset()
    shot = picture(tmp_path / "work")
    gemini_upstream.responder = read_then_text(shot, "A red square.")
    cli = Gemini(proxy.url, tmp_path / "home", tmp_path / "work")
    run = cli.run("what is in shot.png?", "-m", "gemini-2.5-flash")
    assert run.returncode == 0, run.explain()
    assert orjson.loads(run.stdout)["response"].strip().endswith("A red square."), run.explain()
    _, second = gemini_upstream.main_calls()
    last = second.json["contents"][-1]["parts"]
    assert [next(iter(p)) for p in last] == ["functionResponse", "inlineData"], last
    assert base64.b64decode(last[1]["inlineData"]["data"]) == PNG
    rows = completed_rows(proxy, 2)  # the two turns (the CLI's countTokens call has no row)
    main = [r["report"]["sections"] for r in rows if r["path"].endswith(":streamGenerateContent")]
    # the image right after the response is the result's
    assert IMAGE_TOKENS <= main[1]["tool_results"]["before"] < IMAGE_TOKENS + 50, main
    assert main[1]["user"]["before"] == main[0]["user"]["before"], main
