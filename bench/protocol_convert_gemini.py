"""Chat Completions conversations (the trace corpus' shape) converted into Gemini
``generateContent`` bodies, the way Gemini CLI would have sent the same conversation
(``bench.protocol_convert`` does Anthropic Messages and Responses).

- leading system messages: ``systemInstruction`` (``role: "user"``, one text part each, as the
  CLI sends it); a later one becomes a user text part (Gemini has no system turn);
- an assistant message: a ``model`` content, its text as a text part (none when empty), each tool
  call a ``functionCall`` part (``id`` = the call's id, ``args`` parsed from ``arguments``;
  arguments that are not a JSON object become ``{}`` and are counted in ``Conversion.losses``),
  the first call with a stand-in ``thoughtSignature`` (as Gemini 3 models sign a turn's first
  call); ``reasoning_content`` a ``thought`` text part (Gemini CLI drops those from the history,
  other clients keep them);
- every tool and user message between two assistant turns: ONE ``user`` content (Gemini pairs a
  turn's N calls with the next turn's N responses), its ``functionResponse`` parts first (same
  ids, the call's name, ``{"output": text}``), then the user's text parts. A model turn whose
  calls have no results after it (a trace cut mid-turn) is left so: the repair's job.

Tools become one ``functionDeclarations`` entry with ``parametersJsonSchema`` (as the CLI sends
them); a body carries ``generationConfig`` like the CLI's.

    .venv/bin/python -m bench.protocol_convert_gemini --limit 1   # print one conversation
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench.protocol_convert import (
    Conversion,
    _input,
    _leading_systems,
    _text_parts,
)
from rules.messages import text_of

SIGNATURE = "bench-converted"  # the stand-in thoughtSignature of a converted call
GENERATION_CONFIG = {"temperature": 1, "topP": 0.95, "topK": 64}


def gemini_path(model: str, stream: bool) -> str:
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"/v1beta/models/{model}:{method}"


def gemini_tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    declarations = []
    for t in tools:
        fn = t.get("function") or t
        d: dict[str, Any] = {"name": fn.get("name")}
        if fn.get("description") is not None:
            d["description"] = fn["description"]
        schema = fn.get("parameters") or fn.get("input_schema")
        d["parametersJsonSchema"] = schema or {"type": "object", "properties": {}}
        declarations.append(d)
    return [{"functionDeclarations": declarations}]


def _model_content(m: dict[str, Any], losses: list[str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    reasoning = m.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning.strip():
        parts.append({"text": reasoning, "thought": True})
    parts.extend({"text": t} for t in _text_parts(m.get("content")) if t.strip())
    for k, c in enumerate(m.get("tool_calls") or []):
        fn = c.get("function") or {}
        call = {"id": c.get("id"), "name": fn.get("name"),
                "args": _input(fn.get("arguments"), losses, c.get("id"))}  # fmt: skip
        part: dict[str, Any] = {"functionCall": call}
        if k == 0:
            part["thoughtSignature"] = SIGNATURE
        parts.append(part)
    return {"role": "model", "parts": parts or [{"text": ""}]}


def _user_content(run: list[dict[str, Any]], names: dict[str, str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for m in run:
        if m.get("role") == "tool":
            cid = m.get("tool_call_id")
            content = m.get("content")
            output = content if isinstance(content, str) else text_of(content)
            fr = {"id": cid, "name": names.get(str(cid), ""), "response": {"output": output}}
            parts.append({"functionResponse": fr})
    for m in run:
        if m.get("role") != "tool":
            parts.extend({"text": t} for t in _text_parts(m.get("content")))
    return {"role": "user", "parts": parts or [{"text": ""}]}


def to_gemini(chat: dict[str, Any]) -> Conversion:
    """``chat`` (a Chat Completions body) as a Gemini ``generateContent`` body (the model and the
    stream go in the path: ``gemini_path``)."""
    messages: list[dict[str, Any]] = chat["messages"]
    losses: list[str] = []
    lead = _leading_systems(messages)
    system = [{"text": t} for m in messages[:lead] for t in _text_parts(m.get("content"))]
    names: dict[str, str] = {}  # each call's name by id, the latest call of an id winning
    contents: list[dict[str, Any]] = []
    run: list[dict[str, Any]] = []

    def flush() -> None:
        if run:
            contents.append(_user_content(run, names))
            run.clear()

    for m in messages[lead:]:
        if m.get("role") == "assistant":
            flush()
            contents.append(_model_content(m, losses))
            for c in m.get("tool_calls") or []:  # a reused id names the latest call
                names[str(c.get("id"))] = str((c.get("function") or {}).get("name") or "")
        else:  # user, tool, and a later system message as user text
            run.append(m)
    flush()
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": system, "role": "user"}
    tools = gemini_tools(chat.get("tools"))
    if tools is not None:
        body["tools"] = tools
    body["generationConfig"] = dict(GENERATION_CONFIG)
    return Conversion(body, losses)


def main() -> None:
    from tests.support.traces import iter_conversations

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=1)
    args = parser.parse_args()
    for conv in list(iter_conversations())[: args.limit]:
        done = to_gemini({"model": "gemini-2.5-flash", "messages": conv["messages"]})
        print(json.dumps(done.body, indent=1, ensure_ascii=False)[:4000])


if __name__ == "__main__":
    main()


def gemini_view(contents: list[Any]) -> list[Any]:
    """Contents as compared across replays (``bench.protocol_invariants``): consecutive contents
    of one role as one (as the converter makes them), adjacent plain text parts joined (as the
    adapter lowers them: a text the rules appended is a part more in a forwarded body, and one
    text in a converted one)."""
    merged: list[dict[str, Any]] = []
    for c in contents:
        if merged and merged[-1].get("role") == c.get("role"):
            merged[-1] = {**merged[-1], "parts": [*merged[-1]["parts"], *c.get("parts", [])]}
        else:
            merged.append({**c, "parts": list(c.get("parts", []))})
    out = []
    for c in merged:
        parts: list[Any] = []
        for p in c["parts"]:
            plain = isinstance(p, dict) and set(p) == {"text"}
            if plain and parts and isinstance(parts[-1], dict) and set(parts[-1]) == {"text"}:
                parts[-1] = {"text": f"{parts[-1]['text']}\n\n{p['text']}"}
            else:
                parts.append(p)
        out.append({**c, "parts": parts})
    return out
