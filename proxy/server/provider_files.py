"""The provider-side files a request names by id (``provider_refs`` keeps them to their principal).

With the server's key every tenant's files live in one provider account: a file a tenant's code
execution wrote (Anthropic's ``code_execution_output``, a Responses code interpreter's
``container_file_citation``) is named by id in that tenant's answer, and another tenant who
learned the id could read it back as a document or load it into a container of their own. The
places each protocol lets a request name a file:

- Anthropic: an ``image`` or ``document`` block whose ``source`` is ``{"type": "file",
  "file_id": …}``, a ``container_upload`` block's ``file_id``, in a message or a tool result;
- Anthropic, also: an ``image`` inside a ``document`` whose ``source`` is ``{"type": "content",
  "content": [...]}``;
- Responses: an ``input_file`` or ``input_image`` part's ``file_id`` (in a message or a
  function call's output), a ``computer_call_output``'s screenshot (its ``output`` one object),
  a ``code_interpreter`` tool's ``container.file_ids``, an ``image_generation`` tool's
  ``input_image_mask.file_id``;
- Chat Completions: a ``file`` part's ``file.file_id``;
- Chat Completions, Responses and Messages, also: a URL that names Google's storage (below) in
  an image or file part (``image_url``, ``file.file_url``, ``input_file.file_url``,
  ``input_image.image_url``, a ``url`` source), which litellm hands a Gemini or Vertex upstream
  as a file Google reads with the server's credentials;
- Gemini: a ``fileData`` part (``file_data`` alike) whose ``fileUri`` names the provider's own
  storage: a Files API file (``files/…``, or a URL on ``generativelanguage.googleapis.com``) or a
  Cloud Storage object (``gs://…``), which Google reads with the server's credentials; in a
  content's parts, a function response's parts and the system instruction's. Other URLs (a
  public page, a video) are fetched from the web, as the client could fetch them.

Search stores (a Responses ``file_search`` tool's ``vector_store_ids``, a Gemini ``fileSearch``
tool's stores, a ``retrieval`` tool's source) are made by calls the proxy does not relay, so none
can be the principal's own (``stores``). A Responses
``item_reference`` names a stored response's item, and so does an item given by its ``id`` with no
``type`` (the SDKs' ``ItemReference`` has its ``type`` optional), and a ``reasoning`` item given by
its ``id`` without its ``encrypted_content`` (the provider reads the rest from its store): all are
``named_items``. A chat assistant message's ``audio.id`` names an earlier audio answer the
provider keeps (``named_audio``). A tool's own arguments
(Anthropic's ``input``, Gemini's ``args``) are the client's schema, never a provider reference."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

from proxy.upstream.reasoning_items import is_bridged

# the raw body holds a name looked for, or an escape that could spell one in a key (orjson
# decodes ``"file\\u005fid"`` as ``file_id``): the walk is skipped for every other body
_MARKS = (
    b"file_id", b"vector_store_ids", b"fileUri", b"file_uri", b'"fileSearch"', b'"file_search"',
    b'"retrieval"', b"\\u", b"gs:", b"GS:", b"Gs:", b"gS:", b"files/", b"FILES/",
    b"generativelanguage", b"GENERATIVELANGUAGE",
)  # fmt: skip
_ITEM_MARKS = (b"item_reference", b"reasoning", b'"id"', b"\\u")  # "id": an item with no type
_AUDIO_MARKS = (b'"audio"', b"\\u")


ALL_MARKS = frozenset((*_MARKS, *_ITEM_MARKS, *_AUDIO_MARKS))
_WINDOW = 1 << 20  # bytes of a large body scanned between two turns of the event loop
_OVERLAP = max(len(m) for m in ALL_MARKS) - 1


async def marks_in(raw: bytes | None) -> frozenset[bytes] | None:
    """Which marks ``raw`` holds (None: unknown), a MiB at a time with a turn of the event
    loop between: 31 MiB scanned for each mark in one go held the loop half a second."""
    if raw is None:
        return None
    if len(raw) <= _WINDOW:
        return frozenset(m for m in ALL_MARKS if m in raw)
    found: set[bytes] = set()
    view = memoryview(raw)
    for start in range(0, len(raw), _WINDOW):
        window = bytes(view[max(0, start - _OVERLAP) : start + _WINDOW])
        found.update(m for m in ALL_MARKS - found if m in window)
        await asyncio.sleep(0)
    return frozenset(found)


def may_name_files(marks: frozenset[bytes] | None) -> bool:
    """Whether a body holding ``marks`` may name a file or a vector store (None: unknown)."""
    return marks is None or any(mark in marks for mark in _MARKS)


def may_name_items(marks: frozenset[bytes] | None) -> bool:
    """Whether a Responses body holding ``marks`` may hold an ``item_reference``."""
    return marks is None or any(mark in marks for mark in _ITEM_MARKS)


def may_name_audio(marks: frozenset[bytes] | None) -> bool:
    """Whether a chat body holding ``marks`` may name an earlier audio answer."""
    return marks is None or any(mark in marks for mark in _AUDIO_MARKS)


def named_items(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(param, id) of each stored item a Responses ``body`` names: an ``item_reference``, an
    item with an id and no ``type`` (``null`` alike: an item reference to the provider, whose
    ``type`` is optional), a ``reasoning`` item with an id and no ``encrypted_content`` (an id
    that is not a string is the provider's to refuse). With ``store: false`` no answer's items
    were kept, the client's own included, so a reasoning or untyped item counts only when its id
    is all it holds: one carrying its text (a vLLM server's, in ``content``) is the client's
    own."""
    stored = body.get("store") is not False
    for i, item in _items(body.get("input")):
        kind = item.get("type")
        if not isinstance(item.get("id"), str):
            continue
        if (
            kind == "item_reference"
            or (kind is None and (stored or not item.get("content")))
            or (kind == "reasoning" and _looked_up(item, stored))
        ):
            yield f"input[{i}].id", item["id"]


def _looked_up(item: dict[str, Any], stored: bool) -> bool:
    """Whether the provider reads a reasoning item from its store by its id (never one a bridge
    made: no provider stored it, and it goes to none, ``reasoning_items``)."""
    if item.get("encrypted_content") or is_bridged(item):
        return False
    return stored or not (item.get("content") or item.get("summary"))


def named_audio(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(param, id) of each earlier audio answer a chat ``body`` names (an assistant message's
    ``audio.id``)."""
    for i, message in _items(body.get("messages")):
        audio = message.get("audio")
        if isinstance(audio, dict) and isinstance(audio.get("id"), str):
            yield f"messages[{i}].audio.id", audio["id"]


def named_files(protocol: str, body: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(param, id) of each file ``body`` names (an id that is not a string is the provider's to
    refuse, and is yielded as it is)."""
    if protocol == "anthropic":
        for i, message in _items(body.get("messages")):
            yield from _anthropic_blocks(message.get("content"), f"messages[{i}].content")
    elif protocol == "responses":
        source = body.get("input")
        for i, item in _items(source):
            yield from _responses_parts(item.get("content"), f"input[{i}].content")
            yield from _responses_parts(item.get("output"), f"input[{i}].output")
        for i, tool in _items(body.get("tools")):
            container = tool.get("container") if tool.get("type") == "code_interpreter" else None
            if isinstance(container, dict):
                for j, fid in _values(container.get("file_ids")):
                    yield f"tools[{i}].container.file_ids[{j}]", fid
            mask = tool.get("input_image_mask") if tool.get("type") == "image_generation" else None
            if isinstance(mask, dict) and mask.get("file_id") is not None:
                yield f"tools[{i}].input_image_mask.file_id", mask["file_id"]
    elif protocol == "gemini":
        for i, content in _items(body.get("contents")):
            yield from _gemini_parts(content.get("parts"), f"contents[{i}].parts")
        for key in ("systemInstruction", "system_instruction"):
            system = body.get(key)
            if isinstance(system, dict):
                yield from _gemini_parts(system.get("parts"), f"{key}.parts")
    elif protocol == "chat":
        for i, message in _items(body.get("messages")):
            for j, part in _items(message.get("content")):
                at = f"messages[{i}].content[{j}]"
                file = part.get("file") if part.get("type") == "file" else None
                if isinstance(file, dict) and "file_id" in file:
                    yield f"{at}.file.file_id", file["file_id"]
                # Google's storage named by URL: litellm hands it to Google as a file
                if isinstance(file, dict):
                    for key in ("file_url", "file_data"):
                        if _in_storage(file.get(key)):
                            yield f"{at}.file.{key}", file[key]
                image = part.get("image_url") if part.get("type") == "image_url" else None
                url = image.get("url") if isinstance(image, dict) else image
                if _in_storage(url):
                    yield f"{at}.image_url.url", url


def named_stores(protocol: str, body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(param, what it names) of each search store ``body`` names: a Responses ``file_search``
    tool's vector stores, a Gemini ``fileSearch`` tool's stores and a ``retrieval`` tool's source
    (Vertex AI Search, a RAG corpus: the project's own data)."""
    for i, tool in _items(body.get("tools")):
        if protocol == "responses":
            if tool.get("type") == "file_search" and tool.get("vector_store_ids"):
                yield f"tools[{i}].vector_store_ids", "a vector store"
        elif protocol == "gemini":
            for key in ("fileSearch", "file_search"):
                search = tool.get(key)
                if isinstance(search, dict):
                    for names in ("fileSearchStoreNames", "file_search_store_names"):
                        if search.get(names):
                            yield f"tools[{i}].{key}.{names}", "a file search store"
            if tool.get("retrieval") is not None:
                yield f"tools[{i}].retrieval", "a retrieval source"


def _anthropic_blocks(content: Any, at: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    for j, block in _items(content):
        kind = block.get("type")
        if kind == "container_upload" and "file_id" in block:
            yield f"{at}[{j}].file_id", block["file_id"]
        elif kind in ("image", "document"):
            source = block.get("source")
            if isinstance(source, dict) and source.get("type") == "file" and "file_id" in source:
                yield f"{at}[{j}].source.file_id", source["file_id"]
            elif isinstance(source, dict) and source.get("type") == "url":
                if _in_storage(source.get("url")):  # litellm hands Google such a URL as a file
                    yield f"{at}[{j}].source.url", source["url"]
            elif isinstance(source, dict) and source.get("type") == "content" and depth < 2:
                inner = f"{at}[{j}].source.content"
                yield from _anthropic_blocks(source.get("content"), inner, depth + 1)
        elif kind == "tool_result" and depth < 2:
            yield from _anthropic_blocks(block.get("content"), f"{at}[{j}].content", depth + 1)


_RESPONSES_FILE_PARTS = ("input_file", "input_image", "computer_screenshot")


def _responses_parts(parts: Any, at: str) -> Iterator[tuple[str, Any]]:
    if isinstance(parts, dict):  # a ``computer_call_output``'s one screenshot
        if parts.get("type") in _RESPONSES_FILE_PARTS and parts.get("file_id") is not None:
            yield f"{at}.file_id", parts["file_id"]
        return
    for j, part in _items(parts):
        if part.get("type") in _RESPONSES_FILE_PARTS and part.get("file_id") is not None:
            yield f"{at}[{j}].file_id", part["file_id"]
        for key in ("file_url", "image_url"):  # Google's storage, as litellm hands it to Google
            if part.get("type") in _RESPONSES_FILE_PARTS and _in_storage(part.get(key)):
                yield f"{at}[{j}].{key}", part[key]


def _gemini_parts(parts: Any, at: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    for j, part in _items(parts):
        for key in ("fileData", "file_data"):
            data = part.get(key)
            if isinstance(data, dict):
                for uri_key in ("fileUri", "file_uri"):
                    uri = data.get(uri_key)
                    if not isinstance(uri, str) or provider_storage(uri):
                        yield f"{at}[{j}].{key}.{uri_key}", uri
        for key in ("functionResponse", "function_response"):
            response = part.get(key)
            if isinstance(response, dict) and depth < 1:
                yield from _gemini_parts(response.get("parts"), f"{at}[{j}].{key}.parts", 1)


def _in_storage(value: Any) -> bool:
    return isinstance(value, str) and provider_storage(value)


def provider_storage(uri: str) -> bool:
    """Whether a Gemini ``fileUri`` names the provider's storage (a Files API file, a Cloud
    Storage object), read with the credentials of the key the call goes with."""
    text = uri.strip().lower()
    if text.startswith(("files/", "gs://")):
        return True
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("http", "https"):
        return "://" not in text and "/files/" in f"/{text}"  # a relative name of one
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1].split(":", 1)[0].rstrip(".")
    return host == "generativelanguage.googleapis.com" or host.endswith(
        ".generativelanguage.googleapis.com"
    )


def _items(value: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a list (anything else: none; the protocol's validation says what)."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):
                yield i, item


def _values(value: Any) -> Iterator[tuple[int, Any]]:
    if isinstance(value, list):
        yield from enumerate(value)
