"""One request's use of the session's message records (``records.MessageRecords``): what they
know of each message (its hash, chain check, exit, sections, token count) goes into the request's
memos before the rules run, and what the rules computed goes back after (``Recall``); the messages
rules render are known the same way (``Renders``). The pipeline's runner uses it."""

from __future__ import annotations

import operator
from collections.abc import Hashable, Sequence
from functools import partial
from typing import Any, cast

import orjson

from proxy.generations import compact
from proxy.rewrite.records import MessageRecords, RenderedMessages
from proxy.tokens import RequestTokens, TiktokenCounter
from rules.activity import observations
from rules.base import Context, Message, Messages, TokenCounter
from rules.chain import validator as chain_validator
from rules.context import measure


def encoding_of(tokens: TokenCounter) -> str | None:
    """The encoding a counter counts with, when it is one of ours (counts are kept per encoding)."""
    if isinstance(tokens, RequestTokens):
        return getattr(tokens.base, "encoding_name", None)
    if isinstance(tokens, TiktokenCounter):
        return tokens.encoding_name
    return None


_HASH = operator.itemgetter("hash")
_SORTED_DUMPS = partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)


def serialise(
    messages: Messages, serialised: Sequence[bytes | None] | None
) -> tuple[Sequence[Message], Sequence[bytes]]:
    """Each message with its bytes (sorted keys), the caller's where it knows them; without the
    messages orjson refuses (lone surrogates: the rules cope, the records do without them)."""
    known = serialised if serialised is not None and len(serialised) == len(messages) else None
    if known is None:
        try:  # compact: orjson's output keeps kilobytes of spare room (``generations.compact``)
            return messages, list(map(compact, map(_SORTED_DUMPS, messages)))
        except TypeError:
            known = [None] * len(messages)
    elif None not in known:
        return messages, cast("Sequence[bytes]", known)
    kept: list[Message] = []
    datas: list[bytes] = []
    for m, data in zip(messages, known, strict=True):
        if data is None:
            try:
                data = compact(_SORTED_DUMPS(m))
            except TypeError:
                continue
        kept.append(m)
        datas.append(data)
    return kept, datas


class Recall:
    """One request's use of the records: what they know goes into the request's memos (before the
    rules run); what the rules computed goes back (after)."""

    def __init__(
        self,
        records: MessageRecords,
        ctx: Context,
        serialised: Sequence[bytes | None] | None = None,
        encoding: str | None = None,  # ``encoding_of(ctx.tokens)``, when the caller has it
    ) -> None:
        self.ctx = ctx
        if encoding is None:
            encoding = encoding_of(ctx.tokens)
        self.tokens = ctx.tokens if isinstance(ctx.tokens, RequestTokens) else None
        self.count_key = f"tokens:{encoding}" if encoding and self.tokens else None
        self.sections_key = f"sections:{encoding}" if encoding else None
        self.chain = ctx.table(chain_validator.MEMO)
        self.sections = ctx.table(measure.MEMO)
        self.exits = ctx.table(observations.EXIT_MEMO)
        self.hashes = ctx.hashes
        every = ctx.original_messages
        # the messages the session's memos do not know yet (the others are the very objects an
        # earlier request of the session handled): only those are serialised and looked up
        new = ctx.unhashed(every)
        counts = self.tokens.table() if self.tokens is not None and self.count_key else None
        self.counts = counts  # RequestTokens' table, filled here and by ``know``
        # The records ``keep`` completes: those new to this request and those missing a value
        # every request computes (sections, count); the others learnt on their first request
        # all they will. Rendered messages are added as the rules get them.
        self.pairs: list[tuple[Message, dict[str, Any]]] = []
        if every and not new:  # the same body again (a retry, a resend): nothing to look up
            self.taken_bytes, self.original_tokens = 0, None
            return
        if len(new) == len(every):
            source, source_bytes = every, serialised
        else:
            source = [every[i] for i in new]
            source_bytes = (
                [serialised[i] for i in new]
                if serialised is not None and len(serialised) == len(every)
                else None
            )
        originals, datas = serialise(source, source_bytes)
        self.taken_bytes = sum(map(len, datas))  # the messages new to the session's memos
        # a hit in the newer generation (most messages), else ``lookup``
        hits = records.newer(datas)
        found: list[dict[str, Any]] = (
            [r if r is not None else records.lookup(d) for r, d in zip(hits, datas, strict=True)]
            if None in hits
            else cast("list[dict[str, Any]]", hits)
        )
        # once per message of every request: C-level loops where they can be
        ids = list(map(id, originals))
        self.hashes.update(
            zip(ids, zip(originals, map(_HASH, found), strict=True), strict=True)
        )  # remember_hash
        revisit = self.pairs.append
        chain, sections, exits = self.chain, self.sections, self.exits
        sections_key, count_key = self.sections_key, self.count_key
        total, missing = 3, counts is None  # count_messages(original_messages), when all known
        for key, m, record in zip(ids, originals, found, strict=True):
            if len(record) == 1:  # its hash alone: a message new to the records
                revisit((m, record))
                missing = True
                continue
            known = record.get("chain")
            if known is not None:
                chain[key] = (m, known)
            known = record.get("exit")
            if known is not None:
                exits[key] = (m, known)
            if sections_key is not None:
                known = record.get(sections_key)
                if known is not None:
                    sections[key] = (m, known)
                else:
                    revisit((m, record))
            if counts is not None:
                known = record.get(count_key)  # type: ignore[arg-type]
                if known is not None:
                    counts[key] = (m, known)  # RequestTokens.remember, inlined
                    total += known
                else:
                    revisit((m, record))
                    missing = True
        self.original_tokens = (
            None if missing or originals is not every else total
        )  # as count_messages adds them up (when none was known before: else counted)

    def know(self, m: Message, record: dict[str, Any]) -> None:
        """A message rendered this request (``RenderedMessages``): what its record knows goes into
        the request's memos now, what the rules compute for it goes back in ``keep``."""
        # once per replayed edit of every request: remember_hash and RequestTokens.remember,
        # inlined (a record's keys are strings: ``get(None)``, no encoding, finds nothing)
        key = id(m)
        hit = self.hashes.get(key)
        if hit is not None and hit[0] is m:
            return  # known to the session's memos since an earlier request
        self.pairs.append((m, record))
        get = record.get
        known = get("hash")
        if known is not None:
            self.hashes[key] = (m, known)
        known = get("chain")
        if known is not None:
            self.chain[key] = (m, known)
        known = get(self.sections_key)  # type: ignore[arg-type]
        if known is not None:
            self.sections[key] = (m, known)
        known = get(self.count_key)  # type: ignore[arg-type]
        if known is not None:
            self.counts[key] = (m, known)  # type: ignore[index]

    def keep(self) -> None:
        chain, sections, sections_key, count_key = (
            self.chain,
            self.sections,
            self.sections_key,
            self.count_key,
        )
        hashes, exits = self.hashes, self.exits
        for m, record in self.pairs:
            key = id(m)
            if "hash" not in record:  # a rendered message's, once something hashed it
                hit = hashes.get(key)
                if hit is not None and hit[0] is m:
                    record["hash"] = hit[1]
            if "chain" not in record:
                hit = chain.get(key)
                if hit is not None and hit[0] is m:
                    record["chain"] = hit[1]
            if "exit" not in record:
                hit = exits.get(key)
                if hit is not None and hit[0] is m:
                    record["exit"] = hit[1]  # a tuple: immutable
            if sections_key is not None and sections_key not in record:
                hit = sections.get(key)
                if hit is not None and hit[0] is m:
                    record[sections_key] = tuple(hit[1])  # shared from now on: immutable
            if count_key is not None and count_key not in record:
                n = self.tokens.known(m)  # type: ignore[union-attr]
                if n is not None:
                    record[count_key] = n


class Renders:
    """One request's use of ``RenderedMessages`` (``Context.renders``): each message handed out or
    kept is known to the request's ``Recall``."""

    def __init__(self, store: RenderedMessages, recall: Recall) -> None:
        self.store, self.recall, self.know = store, recall, recall.know

    def get(self, key: Hashable) -> Message | None:
        hit = self.store.get(key)
        if hit is None:
            return None
        message, record = hit
        self.know(message, record)
        return message

    def put(self, key: Hashable, message: Message) -> None:
        record = self.store.put(key, message)
        if record is not None:
            self.recall.pairs.append((message, record))
