"""Provider-side state a request names by id, kept to its principal where the upstream call goes
with the server's key (an upstream with ``api_key_env``: every upstream in ``auth.mode: keys``).
The provider then cannot tell one tenant's state from another's, so an id learned from another
tenant would reach theirs:

- a code-execution **container** (Anthropic's ``container``, a Responses ``code_interpreter``
  tool's ``container``) runs code over the files another tenant's calls left in it. One is
  forwarded only if the proxy relayed it to the same principal: read from the answers to
  requests that may open one (``ContainerReader``), kept beside the response ids
  (``proxy.server.response_ids``, under ``CONTAINER``), refused otherwise with the protocol's
  own 400, never forwarded;
- a **file** a code execution wrote (``provider_files``: where each protocol names one) holds
  that tenant's output: kept as containers are, from the same answers (their ``file_id``s), and
  a file named that was not relayed to the principal is refused (an upload the proxy did not
  relay included: with the server's key it is not the principal's either);
- a Responses **item_reference** (or a ``reasoning`` item by its id alone) names an item of a
  stored response: forwarded only if the proxy relayed that item to the same principal (every
  ``"id"`` an answer to a request it may store writes, kept as containers are);
- a chat assistant message's **audio** id names an earlier audio answer the provider keeps:
  forwarded only if the proxy relayed it to the same principal (read from the answers to
  requests that ask for audio, kept as containers are);
- a cache diagnosis's **comparison** (a Responses ``prompt_cache_options.comparison_response_id``,
  Anthropic's ``diagnostics.previous_message_id``) has the provider say how many of the
  request's tokens that answer's prompt shares, a prefix of another tenant's prompt at a time:
  forwarded only if the proxy relayed that answer to the same principal (a response id as
  ``previous_response_id`` needs; an Anthropic message read from the answers to requests that
  ask for a diagnosis, kept as containers are);
- a Gemini **cachedContent** (``cached_content`` alike: Gemini reads either spelling), a
  Responses **conversation** or stored **prompt**, a ``file_search`` tool's **vector stores**
  and an Anthropic container's **custom skills** are made by calls the proxy does not relay
  (``cachedContents``, ``conversations``, the dashboard's prompts, ``vector_stores``,
  ``skills``): with the server's key, none can be the principal's own, so a request naming one
  is refused.

With the client's own key going upstream the provider keeps each key's state apart itself, and
every id passes as sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from proxy.errors import BadRequest
from proxy.protocols.body import echo_id
from proxy.server.answer_ids import (
    AUDIO,
    CONTAINER,
    FILE,
    ITEM,
    MESSAGE,
    EventData,
    answer_ids,
)
from proxy.server.cache_comparisons import asks_diagnosis, comparisons
from proxy.server.provider_files import (
    marks_in,
    may_name_audio,
    may_name_files,
    may_name_items,
    named_audio,
    named_files,
    named_items,
    named_stores,
)
from proxy.server.response_ids import UNSTORED, ResponseIds

if TYPE_CHECKING:
    from proxy.server.services import Services
    from proxy.settings import UpstreamSettings

# the protocols whose requests may name provider-side state by id
OWN_STATE = frozenset({"anthropic", "responses", "gemini", "chat"})
MAX_ITEMS = 512  # item ids kept of one answer at most
READ_ON_LOOP = 1 << 20  # an answer (or event) read for ids on the event loop at most (bytes)


class AnswerReader(Protocol):
    """What reads ids from an answer as it is relayed: whole, or chunk by chunk."""

    def answer(self, body: bytes) -> None: ...

    def feed(self, chunk: bytes) -> None: ...


def shared_key(upstream: UpstreamSettings) -> bool:
    """Whether the upstream is called with the server's credential, whoever the client is (its
    ``api_key_env``, or a provider signed in from the server's environment)."""
    return bool(upstream.server_credentials)


def what_was_read(upstream: UpstreamSettings) -> bool:
    """Whether the upstream gets the body as the proxy read it (written anew), not the client's
    bytes: with the server's key. The checks here read a body as orjson does (the last of a
    repeated member winning, escapes decoded); a parser there that keeps the first of two
    ``previous_response_id``s, or a ``type`` repeated to hide a container, would act on what no
    check saw. Written anew, a body holds once what was checked, and nothing else."""
    return shared_key(upstream)


def _named_containers(protocol: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(param, id) of the containers ``body`` names (ids that are not strings are the
    provider's to refuse)."""
    out: list[tuple[str, str]] = []
    if protocol == "anthropic":
        named = body.get("container")
        if isinstance(named, dict):
            named = named.get("id")
        if isinstance(named, str):
            out.append(("container", named))
    elif protocol == "responses":
        tools = body.get("tools")
        for i, tool in enumerate(tools if isinstance(tools, list) else ()):
            if isinstance(tool, dict) and tool.get("type") == "code_interpreter":
                named = tool.get("container")
                if isinstance(named, str):
                    out.append((f"tools[{i}].container", named))
    return out


def _custom_skills(protocol: str, body: dict[str, Any]) -> list[str]:
    """The params of the custom skills an Anthropic ``body`` loads into its container (made by
    the Skills API, which the proxy does not relay; Anthropic's own skills are anyone's)."""
    container = body.get("container") if protocol == "anthropic" else None
    skills = container.get("skills") if isinstance(container, dict) else None
    return [
        f"container.skills[{i}]"
        for i, skill in enumerate(skills if isinstance(skills, list) else ())
        if isinstance(skill, dict) and skill.get("type") != "anthropic"
    ]


def _opens_containers(protocol: str, body: dict[str, Any]) -> bool:
    """Whether the answer to ``body`` may name a container: it names one, or a tool runs code
    in one (Anthropic's ``code_execution_*``, a Responses ``code_interpreter``); or, on chat,
    an audio answer (audio asked for)."""
    if protocol == "anthropic" and "container" in body:
        return True
    if protocol == "chat":
        modalities = body.get("modalities")
        return body.get("audio") is not None or (
            isinstance(modalities, list) and "audio" in modalities
        )
    tools = body.get("tools")
    for tool in tools if isinstance(tools, list) else ():
        kind = tool.get("type") if isinstance(tool, dict) else None
        if isinstance(kind, str) and (
            kind.startswith("code_execution") or kind == "code_interpreter"
        ):
            return True
    return False


def kept_ids_for(protocol: str, ids: ResponseIds | None, services: Services) -> ResponseIds | None:
    """Where a protocol's handler keeps the containers relayed (its response ids' keeper, or one
    of its own on the same table); None for a protocol that names no provider-side state."""
    if protocol not in OWN_STATE:
        return None
    return ids or ResponseIds(services.store, services.settings.store.retention_days)


async def require_own(
    ids: ResponseIds | None,
    principal: str,
    protocol: str,
    body: dict[str, Any],
    upstream: Any,
    raw: bytes | None = None,
    items: bool = False,
) -> None:
    """Raise the protocol's own 400 (``BadRequest``) when ``body`` names provider-side state
    that is not ``principal``'s, the upstream being called with the server's key (``ids``: the
    containers and files relayed; None where none can be named, as for a Gemini
    ``countTokens``; ``raw``: the body's bytes, which say when no file can be named; ``items``:
    stored responses' items are kept to their principal, ``auth.check_previous_response_id``)."""
    if not shared_key(upstream):
        return
    for param, cid in _named_containers(protocol, body):
        if ids is None or not await ids.known(principal, CONTAINER + cid):
            shown = echo_id(cid)
            raise BadRequest(
                f"Container '{shown}' not found for this client.",
                param=param,
                code="container_not_found",
            )
    for param, named in comparisons(protocol, body):
        if protocol == "anthropic":
            await _require_known(ids, principal, [(param, named)], MESSAGE, "Message", "message")
        # a response id relayed to the principal, stored or not (the check is off with
        # ``previous_response_id``'s, whose ids it reads)
        elif items and (ids is None or not await ids.known(principal, UNSTORED + named)):
            await _require_known(ids, principal, [(param, named)], "", "Response", "response")
    marks = await marks_in(raw)
    if may_name_files(marks):
        await _require_own_files(ids, principal, protocol, body)
    if items and protocol == "responses" and may_name_items(marks):
        await _require_known(ids, principal, named_items(body), ITEM, "Item with id", "item")
    if protocol == "chat" and may_name_audio(marks):
        await _require_known(ids, principal, named_audio(body), AUDIO, "Audio", "audio")
    if protocol == "gemini" and (
        body.get("cachedContent") is not None or body.get("cached_content") is not None
    ):
        raise BadRequest(
            "cachedContent cannot be used through this proxy: the upstream is called with the "
            "server's key, and a cached content is made by a call the proxy does not relay.",
            param="cachedContent",
        )
    for param in _custom_skills(protocol, body):
        raise BadRequest(
            f"A custom skill ({param}) cannot be used through this proxy: the upstream is called "
            "with the server's key, and a custom skill is made by a call the proxy does not relay.",
            param=param,
        )
    for name, what in (("conversation", "a conversation"), ("prompt", "a stored prompt")):
        if protocol == "responses" and body.get(name) is not None:
            raise BadRequest(
                f"{name} cannot be used through this proxy: the upstream is called with the "
                f"server's key, and {what} is made by a call the proxy does not relay.",
                param=name,
            )


async def _require_known(
    ids: ResponseIds | None,
    principal: str,
    named: Iterable[tuple[str, str]],
    kind: str,
    said: str,
    code: str,
) -> None:
    """The protocol's 400 (``{code}_not_found``) for the first id of ``named`` not relayed to
    ``principal`` (kept under ``kind``)."""
    for param, ident in named:
        if ids is None or not await ids.known(principal, kind + ident):
            raise BadRequest(
                f"{said} '{echo_id(ident)}' not found for this client.",
                param=param,
                code=f"{code}_not_found",
            )


async def _require_own_files(
    ids: ResponseIds | None, principal: str, protocol: str, body: dict[str, Any]
) -> None:
    for param, fid in named_files(protocol, body):
        if not isinstance(fid, str):
            continue  # not an id: the provider's to refuse
        if ids is None or not await ids.known(principal, FILE + fid):
            raise BadRequest(
                f"File '{echo_id(fid)}' not found for this client.",
                param=param,
                code="file_not_found",
            )
    for param, what in named_stores(protocol, body):
        raise BadRequest(
            f"{param} cannot be used through this proxy: the upstream is called with the "
            f"server's key, and {what} is made by a call the proxy does not relay.",
            param=param,
        )


def container_reader(
    ids: ResponseIds | None,
    principal: str,
    protocol: str,
    body: dict[str, Any],
    status: int,
    upstream: Any,
    then: AnswerReader | None = None,
    items: bool = False,
) -> AnswerReader | None:
    """What reads the containers the answer to ``body`` names, beside ``then`` (another reader
    of the same answer), with ``items`` the ids of a response it may store, and the message a
    request asking for a cache diagnosis is answered with; ``then`` alone when there are none
    to keep."""
    if ids is None or not 200 <= status < 300 or not shared_key(upstream):
        return then
    items = items and protocol == "responses" and body.get("store") is not False
    messages = asks_diagnosis(protocol, body)
    if not items and not messages and not _opens_containers(protocol, body):
        return then
    return ContainerReader(ids, principal, then, items, messages)


def answer_reader(
    stored: ResponseIds | None,
    kept: ResponseIds | None,
    principal: str,
    protocol: str,
    body: dict[str, Any],
    status: int,
    upstream: Any,
    session: str | None = None,
) -> AnswerReader | None:
    """Every reader of the ids an answer gives its principal: a response it may continue
    (``stored``: the Responses API's ids, kept with the ``session`` it was relayed in), and the
    containers, files and items it names."""
    first = stored.recorder(principal, body, status, session) if stored is not None else None
    return container_reader(kept, principal, protocol, body, status, upstream, first,
                            items=stored is not None)  # fmt: skip


class ContainerReader:
    """Notes every container and file id an answer names, for its principal, with ``items``
    every item id of a stored response (at most ``MAX_ITEMS``) and with ``messages`` the
    Anthropic message's own id, read where the provider writes them (``answer_ids``): all of
    the answer, as an id may come in its last event."""

    __slots__ = (
        "_events", "_ids", "_items", "_items_kept", "_messages", "_principal", "_seen", "_then"
    )  # fmt: skip

    def __init__(
        self,
        ids: ResponseIds,
        principal: str,
        then: AnswerReader | None,
        items: bool = False,
        messages: bool = False,
    ) -> None:
        self._ids = ids
        self._principal = principal
        self._then = then
        self._items = items
        self._messages = messages
        self._items_kept = 0
        self._events = EventData()
        self._seen: set[str] = set()

    def answer(self, body: bytes) -> None:
        if self._then is not None:
            self._then.answer(body)
        self._read(body)

    def feed(self, chunk: bytes) -> None:
        if self._then is not None:
            self._then.feed(chunk)
        for data in self._events.feed(chunk):
            self._read(data)

    def _read(self, data: bytes) -> None:
        # only what may hold one is parsed (a text delta's event names its item as "item_id")
        if not (
            b"container" in data
            or b"file_id" in data
            or b'"audio"' in data
            or (self._items and b'"id"' in data)
            or (self._messages and b'"message' in data)
        ):
            return
        if len(data) <= READ_ON_LOOP:
            self._keep(answer_ids(data, self._items, self._messages))
            return
        # parsed and walked at ~20 ms a MiB: a larger answer on a worker thread, its ids kept
        # when it is done (a request naming one before then is refused, as an unknown id is)
        read = partial(_ids_of, data, self._items, self._messages)
        done = asyncio.get_running_loop().run_in_executor(None, read)
        done.add_done_callback(self._kept_when_read)

    def _kept_when_read(self, done: asyncio.Future[list[str]]) -> None:
        if not done.cancelled() and done.exception() is None:
            self._keep(done.result())

    def _keep(self, found: Iterable[str]) -> None:
        for named in found:
            if named in self._seen:
                continue
            if named.startswith(ITEM):
                if self._items_kept >= MAX_ITEMS:
                    continue
                self._items_kept += 1
            self._seen.add(named)
            self._ids.note(self._principal, named)


def _ids_of(data: bytes, items: bool, messages: bool) -> list[str]:
    return list(answer_ids(data, items, messages))
