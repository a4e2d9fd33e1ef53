"""Images inside tool results, on the three protocols whose chat view reads a result's text only
(Anthropic ``tool_result``, Responses ``function_call_output`` parts, Gemini's
``functionResponse.parts``, as Gemini 3 takes a function's images): the proxy's count sees
them at the providers' estimate, a result the budget elides goes without its images, and the
chain repair keeps a Gemini result's images as it keeps the others'."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from proxy.protocols.anthropic import ANTHROPIC
from proxy.protocols.base import TAG, Adapter
from proxy.protocols.chat import CHAT
from proxy.protocols.gemini import GEMINI
from proxy.protocols.responses import RESPONSES
from proxy.rewrite.engine import Engine
from rules.media import AUDIO_TOKENS, DOCUMENT_TOKENS, IMAGE_TOKENS, VIDEO_TOKENS
from rules.messages import MEDIA_MARKS

DATA = "iVBORw0KGgo" + "Q" * 400  # what each image's bytes are, in the body
WORDS = "word " * 40


def anthropic(n: int, images: bool = True) -> dict[str, Any]:
    msgs: list[Any] = [{"role": "user", "content": "look at the screenshots"}]
    for i in range(n):
        use = {
            "type": "tool_use",
            "id": f"t{i}",
            "name": "Read",
            "input": {"file_path": f"/{i}.png"},
        }
        content: list[Any] = [{"type": "text", "text": f"shot {i} {WORDS}"}]
        if images:
            source = {"type": "base64", "media_type": "image/png", "data": DATA}
            content.append({"type": "image", "source": source})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": content}
        msgs += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 10, "messages": msgs}


def responses(n: int, images: bool = True) -> dict[str, Any]:
    items: list[Any] = [{"role": "user", "content": "look at the screenshots"}]
    for i in range(n):
        args = json.dumps({"path": f"/{i}.png"})
        output: list[Any] = [{"type": "input_text", "text": f"shot {i} {WORDS}"}]
        if images:
            output.append({"type": "input_image", "image_url": f"data:image/png;base64,{DATA}"})
        items += [
            {"type": "function_call", "call_id": f"c{i}", "name": "view_image", "arguments": args},
            {"type": "function_call_output", "call_id": f"c{i}", "output": output},
        ]
    items += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    return {"model": "gpt-4o", "input": items}


def chat(n: int, images: bool = True) -> dict[str, Any]:
    """Chat Completions, where a provider takes a tool message's parts as they are."""
    msgs: list[Any] = [{"role": "user", "content": "look at the screenshots"}]
    for i in range(n):
        fn = {"name": "view_image", "arguments": json.dumps({"path": f"/{i}.png"})}
        content: list[Any] = [{"type": "text", "text": f"shot {i} {WORDS}"}]
        if images:
            url = f"data:image/png;base64,{DATA}"
            content.append({"type": "image_url", "image_url": {"url": url}})
        msgs += [
            {
                "role": "assistant",
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": fn}],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": content},
        ]
    msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
    return {"model": "gpt-4o", "messages": msgs}


def image_part(mime: str = "image/png") -> dict[str, Any]:
    return {"inlineData": {"mimeType": mime, "data": DATA}}


def function_response(cid: str, text: str, *media: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {"id": cid, "name": "read_file", "response": {"output": text}}
    if media:
        response["parts"] = list(media)
    return {"functionResponse": response}


def gemini(n: int, images: bool = True, beside: bool = False) -> dict[str, Any]:
    """Each read image in its function response's own ``parts`` (Gemini 3's way), or with
    ``beside`` as the part right after it in the same content (as Gemini CLI sends a read image
    to a model it does not nest it for)."""
    contents: list[Any] = [{"role": "user", "parts": [{"text": "look at the screenshots"}]}]
    for i in range(n):
        call = {"id": f"c{i}", "name": "read_file", "args": {"file_path": f"/{i}.png"}}
        media = [image_part()] if images else []
        text = f"shot {i} {WORDS}"
        answer = (
            [function_response(f"c{i}", text), *media]
            if beside
            else [function_response(f"c{i}", text, *media)]
        )
        contents += [
            {"role": "model", "parts": [{"functionCall": call}]},
            {"role": "user", "parts": answer},
        ]
    contents += [
        {"role": "model", "parts": [{"text": "ok"}]},
        {"role": "user", "parts": [{"text": "next"}]},
    ]
    return {"contents": contents}


def gemini_beside(n: int, images: bool = True) -> dict[str, Any]:
    return gemini(n, images, beside=True)


PROTOCOLS: list[tuple[str, Callable[..., dict[str, Any]], Adapter, str]] = [
    ("anthropic", anthropic, ANTHROPIC, "claude-sonnet-4-5"),
    ("responses", responses, RESPONSES, "gpt-4o"),
    ("gemini", gemini, GEMINI, "gemini-3-pro-preview"),
    ("gemini-beside", gemini_beside, GEMINI, "gemini-2.5-flash"),
    ("chat", chat, CHAT, "gpt-4o"),
]


def forwarded(out: Any) -> str:
    data = json.dumps(out.body)
    for key in (TAG, *MEDIA_MARKS):
        assert key not in data
    return data


async def sent(
    engine: Engine, body: dict[str, Any], adapter: Adapter, model: str, session: str, **kw: Any
) -> Any:
    return await engine.rewrite(
        body, {}, now=1000.0, session_id=session, adapter=adapter, model=model, **kw
    )


@pytest.mark.parametrize(("name", "make", "adapter", "model"), PROTOCOLS)
async def test_images_in_results_count(
    engine: Engine, name: str, make: Callable[..., dict[str, Any]], adapter: Adapter, model: str
) -> None:
    with_images = await sent(engine, make(6), adapter, model, f"{name}-a")
    without = await sent(engine, make(6, images=False), adapter, model, f"{name}-b")
    before = with_images.report["tokens"]["before"] - without.report["tokens"]["before"]
    assert before == 6 * IMAGE_TOKENS
    after = with_images.report["prune"]["tokens_after"] - without.report["prune"]["tokens_after"]
    assert after == 6 * IMAGE_TOKENS
    sections, bare = with_images.report["sections"], without.report["sections"]
    assert sections["tool_results"]["before"] - bare["tool_results"]["before"] == 6 * IMAGE_TOKENS
    assert forwarded(with_images).count(DATA) == 6  # nothing elided: all of it forwarded


@pytest.mark.parametrize(("name", "make", "adapter", "model"), PROTOCOLS)
async def test_an_elided_result_goes_without_its_images(
    engine: Engine, name: str, make: Callable[..., dict[str, Any]], adapter: Adapter, model: str
) -> None:
    # 12 screenshots of ~1,650 tokens each (~20,000) under a budget of 10,000: all but the
    # last two are masked, and nothing else need go
    out = await sent(engine, make(12), adapter, model, f"{name}-c", budget=10_000)
    data = forwarded(out)
    assert out.report["prune"]["compacted"] is True
    assert out.report["prune"]["stages"] == {"mask": pytest.approx(16_100, abs=100)}
    assert data.count(DATA) == 2 and data.count("[ctxproxy: elided") == 10
    assert out.report["prune"]["tokens_after"] <= 5000
    # the last screenshot is whole, with its text
    assert "shot 11 " in data and data.rindex(DATA) > data.index("shot 11 ")
    # each placeholder stands alone (no image follows it within its result) and states what
    # the elision took, the image's estimate with the text's tokens
    for chunk in data.split("[ctxproxy: elided")[1:]:
        result = chunk.split("shot ", 1)[0]
        assert DATA not in result
        stated = re.search(r"([\d,]+) tokens", result)
        assert stated is not None and int(stated.group(1).replace(",", "")) > IMAGE_TOKENS
    # resent, the session's elisions are replayed to the byte
    again = await sent(engine, make(12), adapter, model, f"{name}-c", budget=10_000)
    assert forwarded(again) == data


async def test_gemini_media_parts_count_by_their_type(engine: Engine) -> None:
    def body(*media: dict[str, Any]) -> dict[str, Any]:
        parts = [{"text": "what is in these?"}, *media]
        return {"contents": [{"role": "user", "parts": parts}]}

    bare = await sent(engine, body(), GEMINI, "gemini-2.5-pro", "g-bare")
    media = (
        image_part(),
        image_part("audio/mp3"),
        image_part("video/mp4"),
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/f.pdf"}},
        {"file_data": {"mime_type": "image/jpeg", "file_uri": "gs://b/f.jpg"}},
    )
    out = await sent(engine, body(*media), GEMINI, "gemini-2.5-pro", "g-media")
    extra = out.report["tokens"]["before"] - bare.report["tokens"]["before"]
    assert extra == 2 * IMAGE_TOKENS + AUDIO_TOKENS + VIDEO_TOKENS + DOCUMENT_TOKENS
    forwarded(out)


async def test_an_image_models_own_images_count_in_its_turn(engine: Engine) -> None:
    """A model turn's media (an image model's output, resent in the history) counts in the
    assistant's section; a changed turn's lifting keeps it where it was."""

    def body(*media: dict[str, Any]) -> dict[str, Any]:
        said = {"role": "model", "parts": [{"text": "here it is " + WORDS}, *media]}
        return {
            "contents": [
                {"role": "user", "parts": [{"text": "draw a cat"}]},
                said,
                {"role": "user", "parts": [{"text": "make it blue"}]},
            ]
        }

    model = "gemini-2.5-flash-image"
    bare = await sent(engine, body(), GEMINI, model, "g-drawn-bare")
    out = await sent(engine, body(image_part(), image_part()), GEMINI, model, "g-drawn")
    assert out.report["tokens"]["before"] - bare.report["tokens"]["before"] == 2 * IMAGE_TOKENS
    sections, plain = out.report["sections"], bare.report["sections"]
    assert sections["assistant"]["before"] - plain["assistant"]["before"] == 2 * IMAGE_TOKENS
    assert forwarded(out).count(DATA) == 2


def call(cid: str) -> dict[str, Any]:
    return {"functionCall": {"id": cid, "name": "read_file", "args": {"file_path": "/a.png"}}}


def nested(part: dict[str, Any]) -> list[Any]:
    return [m["inlineData"]["mimeType"] for m in part["functionResponse"].get("parts", [])]


def answered_twice(*parts: dict[str, Any]) -> dict[str, Any]:
    """One call, and a user content answering it with ``parts`` (two responses and more)."""
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "read it"}]},
            {"role": "model", "parts": [call("c1")]},
            {"role": "user", "parts": list(parts)},
        ]
    }


async def test_gemini_merged_duplicate_keeps_both_results_images(engine: Engine) -> None:
    body = answered_twice(
        function_response("c1", "one", image_part("image/png")),
        function_response("c1", "two", image_part("image/gif")),
    )
    out = await sent(engine, body, GEMINI, "gemini-3-pro-preview", "g-dup")
    forwarded(out)
    assert [r["kind"] for r in out.report["repairs"]] == ["duplicate_result"]
    parts = out.body["contents"][2]["parts"]
    assert len(parts) == 1
    assert nested(parts[0]) == ["image/png", "image/gif"]
    assert "two" in json.dumps(parts[0]["functionResponse"]["response"])


async def test_gemini_orphan_keeps_its_image(engine: Engine) -> None:
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"text": "ok"}]},
            {
                "role": "user",
                "parts": [
                    function_response("c_gone", "the shot", image_part("image/webp")),
                    {"text": "what is it?"},
                ],
            },
        ]
    }
    out = await sent(engine, body, GEMINI, "gemini-3-pro-preview", "g-orphan")
    forwarded(out)
    assert "orphan_result" in [r["kind"] for r in out.report["repairs"]]
    parts = [p for c in out.body["contents"][2:] for p in c["parts"]]
    assert not any("functionResponse" in p for p in parts)
    assert [p["inlineData"]["mimeType"] for p in parts if "inlineData" in p] == ["image/webp"]
    texts = [p["text"] for p in parts if "text" in p]
    assert any("the shot" in t for t in texts) and "what is it?" in texts


async def test_an_elided_anthropic_result_keeps_the_clients_breakpoint(engine: Engine) -> None:
    body = anthropic(12)
    mark = {"type": "ephemeral"}
    first = body["messages"][2]["content"][0]  # the first screenshot's result: elided
    first["content"][-1]["cache_control"] = mark
    out = await sent(engine, body, ANTHROPIC, "claude-sonnet-4-5", "a-mark", budget=10_000)
    data = forwarded(out)
    assert data.count(DATA) == 2
    result = out.body["messages"][2]["content"][0]
    assert result["content"] == [
        {"type": "text", "text": result["content"][0]["text"], "cache_control": mark}
    ]
    assert result["content"][0]["text"].startswith("[ctxproxy: elided Read result")


@pytest.mark.parametrize(("name", "make", "adapter", "model"), PROTOCOLS)
async def test_a_result_of_images_and_little_text_is_not_capped(
    engine: Engine, name: str, make: Callable[..., dict[str, Any]], adapter: Adapter, model: str
) -> None:
    # six screenshots in one result: 9,600 tokens, over the 8,000 a result's text is capped at
    body = make(1)
    if name == "gemini":
        response = body["contents"][2]["parts"][0]["functionResponse"]
        response["parts"] = response["parts"] * 6
    elif name == "gemini-beside":
        parts = body["contents"][2]["parts"]
        parts[1:] = parts[1:] * 6
    else:
        key, at = {
            "anthropic": ("messages", 2),
            "responses": ("input", 2),
            "chat": ("messages", 2),
        }[name]
        item = body[key][at]
        inner = item["content"][0] if name == "anthropic" else item
        field = "output" if name == "responses" else "content"
        inner[field] = [inner[field][0], *[inner[field][1]] * 6]
    out = await sent(engine, body, adapter, model, f"{name}-cap")
    assert out.report["prune"]["stages"] == {}
    assert "capped" not in forwarded(out) and forwarded(out).count(DATA) == 6
    assert out.body == body


async def test_gemini_images_beside_their_responses_stay_beside_them(engine: Engine) -> None:
    body = answered_twice(
        function_response("c1", "one"),
        image_part("image/png"),
        function_response("c1", "two"),
        image_part("image/gif"),
        {"text": "and?"},
    )
    out = await sent(engine, body, GEMINI, "gemini-2.5-flash", "g-beside")
    forwarded(out)
    assert [r["kind"] for r in out.report["repairs"]] == ["duplicate_result"]
    parts = out.body["contents"][2]["parts"]
    kinds = [next(iter(p)) for p in parts]
    assert kinds == ["functionResponse", "inlineData", "inlineData", "text"]
    assert [p["inlineData"]["mimeType"] for p in parts[1:3]] == ["image/png", "image/gif"]
    assert out.report["sections"]["tool_results"]["before"] > 2 * IMAGE_TOKENS


async def test_a_capped_chat_result_keeps_its_image(engine: Engine) -> None:
    body = chat(1)
    text = body["messages"][2]["content"][0]
    text["text"] = "\n".join(f"line {i}: " + "lorem ipsum " * 8 for i in range(1500))  # ~25k
    out = await sent(engine, body, CHAT, "gpt-4o", "c-cap")
    content = out.body["messages"][2]["content"]
    assert "capped" in content[0]["text"] and len(content[0]["text"]) < len(text["text"]) / 2
    assert [p["type"] for p in content] == ["text", "image_url"]
    assert content[1] == body["messages"][2]["content"][1]
