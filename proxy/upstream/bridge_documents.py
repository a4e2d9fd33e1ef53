"""Anthropic ``document`` blocks as litellm's Messages bridge can carry them to another provider.

litellm translates a document whose source is base64; one whose source is ``text`` (a plain-text
file) or ``content`` (the client's own blocks) it drops without a word, and the model answers
without the document the user sent. One whose source is a URL it sends as an ``image_url`` of
that URL: Gemini reads it (litellm gives it as ``file_data``), OpenAI refuses it on every retry.
A document inside a ``tool_result`` (Claude Code's ``Read`` of a PDF) it sends to OpenAI as an
``image_url`` of ``application/pdf``, which OpenAI refuses on every retry while the result stays
in the history.

Here, for a bridge only (Anthropic's own API reads all of these): a text or content document
becomes a text block (``<document title="…">…</document>``), in a message or a tool result, and
so does a URL document (naming its URL) for a provider that reads none by URL; a file document
inside a tool result goes after the message's tool results, as a document of the user's (which
litellm sends as a file), a note left in its place. The client's objects are never changed;
messages without such blocks are the same objects."""

from __future__ import annotations

from typing import Any

_MOVED = "[document: attached after the tool results]"


def bridged_documents(messages: Any, urls: bool = False) -> Any:
    """``messages`` with their documents as the bridge carries them (above); ``urls``: the
    provider reads a document by its URL."""
    if not isinstance(messages, list):
        return messages
    return [_message(m, urls) for m in messages]


def _message(m: Any, urls: bool) -> Any:
    content = m.get("content") if isinstance(m, dict) else None
    if not isinstance(content, list) or not any(_holds_document(b) for b in content):
        return m
    blocks: list[Any] = []
    moved: list[Any] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            block, taken = _result(block, urls)
            moved.extend(taken)
            blocks.append(block)
        else:
            blocks.append(_readable(block, urls))
    return {**m, "content": [*blocks, *moved]}


def _result(block: dict[str, Any], urls: bool) -> tuple[dict[str, Any], list[Any]]:
    inner = block.get("content")
    if not isinstance(inner, list):
        return block, []
    kept: list[Any] = []
    moved: list[Any] = []
    for b in inner:
        readable = _readable(b, urls)
        if readable is b and _is_document(b):  # a file: the user's, after the results
            moved.append(b)
            kept.append({"type": "text", "text": _MOVED})
        else:
            kept.append(readable)
    return {**block, "content": kept}, moved


def _readable(block: Any, urls: bool) -> Any:
    """A text or content document as a text block, a URL one too unless ``urls``; any other
    block as it is."""
    if not _is_document(block):
        return block
    source = block.get("source")
    kind = source.get("type") if isinstance(source, dict) else None
    if kind == "text":
        text = source.get("data")
    elif kind == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            text = inner
        elif isinstance(inner, list):
            text = "\n".join(
                b["text"] for b in inner if isinstance(b, dict) and isinstance(b.get("text"), str)
            )
        else:
            text = None
    elif kind == "url" and not urls and isinstance(source.get("url"), str):
        text = f"(not attached: a document at {source['url']})"
    else:
        return block
    if not isinstance(text, str):
        return block
    title = block.get("title")
    head = f'<document title="{title}">' if isinstance(title, str) and title else "<document>"
    return {"type": "text", "text": f"{head}\n{text}\n</document>"}


def _is_document(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "document"


def _holds_document(block: Any) -> bool:
    if _is_document(block):
        return True
    inner = block.get("content") if isinstance(block, dict) else None
    return isinstance(inner, list) and any(_is_document(b) for b in inner)
