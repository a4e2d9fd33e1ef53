"""The runner: applies the configured rules in order, timing each, containing their errors, then
runs the final integrity check and computes prefix reuse. Shared by the server and ``rewrite``."""

from __future__ import annotations

import operator
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any, Literal, cast

import orjson

from proxy.generations import compact
from proxy.rewrite import lineage
from proxy.rewrite.lineage import PREFIX_NAMESPACE
from proxy.rewrite.records import OBJECT_FACTOR, MessageRecords, RenderedMessages
from proxy.rewrite.session_memos import ObjectMemos, SessionMemos
from proxy.settings import ConfiguredRule
from proxy.tokens import RequestTokens, TiktokenCounter
from rules.activity import observations
from rules.base import Context, Message, Messages, SessionState, TokenCounter, release_lists
from rules.chain import validator as chain_validator
from rules.context import measure
from rules.registry import load_rule
from rules.report import Report, merge_report, new_report


class RuleFailed(RuntimeError):
    """A rule raised while the pipeline runs in strict mode (``on_rule_error: fail``)."""


@dataclass(frozen=True)
class PipelineOutcome:
    messages: Messages
    state: SessionState
    report: Report
    hashes: list[str]  # each message's content hash (``Context.hash_of``): keys for the adapters
    history: Sequence[str] = ()  # the client's messages' hashes (``lineage.history_hashes``)


@dataclass(frozen=True)
class _Step:
    name: str
    module: ModuleType
    config: Any


def _encoding(tokens: TokenCounter) -> str | None:
    """The encoding a counter counts with, when it is one of ours (counts are kept per encoding)."""
    if isinstance(tokens, RequestTokens):
        return getattr(tokens.base, "encoding_name", None)
    if isinstance(tokens, TiktokenCounter):
        return tokens.encoding_name
    return None


_HASH = operator.itemgetter("hash")
_SORTED_DUMPS = partial(orjson.dumps, option=orjson.OPT_SORT_KEYS)


def _serialise(
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


class _Recall:
    """One request's use of the records: what they know goes into the request's memos (before the
    rules run); what the rules computed goes back (after)."""

    def __init__(
        self,
        records: MessageRecords,
        ctx: Context,
        serialised: Sequence[bytes | None] | None = None,
        encoding: str | None = None,  # ``_encoding(ctx.tokens)``, when the caller has it
    ) -> None:
        self.ctx = ctx
        if encoding is None:
            encoding = _encoding(ctx.tokens)
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
        originals, datas = _serialise(source, source_bytes)
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


class _Renders:
    """One request's use of ``RenderedMessages`` (``Context.renders``): each message handed out or
    kept is known to the request's ``_Recall``."""

    def __init__(self, store: RenderedMessages, recall: _Recall) -> None:
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


class Pipeline:
    def __init__(
        self,
        rules: list[ConfiguredRule],
        on_rule_error: Literal["skip", "fail"] = "skip",
        modules: Mapping[str, Any] | None = None,  # name -> module, for rules outside the registry
    ) -> None:
        modules = modules or {}
        self.steps = [
            _Step(r.name, modules.get(r.name) or load_rule(r.name), r.config) for r in rules
        ]
        self.on_rule_error = on_rule_error
        self.records = MessageRecords()
        self.renders: RenderedMessages | None = RenderedMessages()  # None: render every time
        # each session's per-object memos across its requests (None: made afresh every request)
        self.memos: SessionMemos | None = SessionMemos()

    def memos_of(self, ctx: Context) -> ObjectMemos | None:
        """The per-object memos kept for ``ctx``'s session, if any."""
        return self.memos.peek(ctx.session_id, _encoding(ctx.tokens)) if self.memos else None

    def forget(self, session: str) -> None:
        """Drop what is kept of ``session``'s messages as objects: its per-object memos, and
        the renderings (shared by every session: one of them may be the object changed)."""
        if self.memos is not None:
            self.memos.forget(session)
        if self.renders is not None:
            self.renders.clear()

    @property
    def rule_names(self) -> list[str]:
        return [s.name for s in self.steps]

    def run(
        self, ctx: Context, serialised: Sequence[bytes | None] | None = None
    ) -> PipelineOutcome:
        """``serialised``: each of ``ctx.original_messages``' bytes with sorted keys where the
        caller knows them (a protocol adapter's kept lowerings), None where not."""
        report = new_report(ctx.session_id)
        encoding = _encoding(ctx.tokens)
        memos = self.memos.take(ctx.session_id, encoding) if self.memos is not None else None
        if memos is not None:
            ctx = memos.attach(ctx)
        recall = _Recall(self.records, ctx, serialised, encoding)
        # the state of this request's own branch (``lineage``): its history's hashes are known now
        own = lineage.history_hashes(ctx)
        resumed_state, fork, key = lineage.resume_of(ctx, own)
        if fork is not None:
            report["lineage"] = fork
            ctx = lineage.forked(ctx, resumed_state)
        tokens_before = recall.original_tokens
        if tokens_before is None:
            tokens_before = ctx.tokens.count_messages(ctx.original_messages)
        # the one report dict, filled in as the rules run
        renders = _Renders(self.renders, recall) if self.renders is not None else None
        ctx = ctx.evolve(report=report, renders=renders)
        timings, clock = report["timings_ms"], time.perf_counter
        for step in self.steps:
            name, started = step.name, clock()
            try:
                result = step.module.apply(ctx, step.config)
            except Exception as exc:  # contained per rule: the input stands, the error is reported
                if self.on_rule_error == "fail":
                    raise RuleFailed(f"rule {name} raised {type(exc).__name__}: {exc}") from exc
                report["rule_errors"].append(
                    {"rule": name, "error": f"{type(exc).__name__}: {exc}"}
                )
                result = None
            # ms to the microsecond (``round(x, 3)`` costs ~0.4 µs a rule)
            timings[name] = int((clock() - started) * 1e6 + 0.5) / 1000
            if result is not None:
                if result.report:
                    merge_report(report, result.report)
                if result.messages is not ctx.messages or result.state is not ctx.state:
                    ctx = ctx.evolve(messages=result.messages, state=result.state)

        messages = self._integrity_check(ctx, report)
        tokens_after = ctx.tokens.count_messages(messages)
        report["tokens"] = {"before": tokens_before, "after": tokens_after, "budget": ctx.budget}
        hashes = ctx.hashes_of(messages)
        state = self._record_prefix(ctx, hashes, messages, report, tokens_after)
        state = lineage.record(state, key)
        recall.keep()
        if memos is not None and self.memos is not None:
            memos.taken_bytes += OBJECT_FACTOR * recall.taken_bytes
            handled = len(ctx.original_messages) + len(messages)
            self.memos.settle(ctx.session_id, encoding, memos, handled)
        release_lists()
        return PipelineOutcome(messages, state, report, hashes, own)

    def _integrity_check(self, ctx: Context, report: Report) -> Messages:
        """The same validator the tests use; a violation here is a bug in a rule, so repair it.
        Through the request's validator table, so messages checked by ``repair_tool_chain``
        (the same objects) are not checked again, only the ones a rule replaced or added; and
        a list of the very messages checked before (``Context.derived``) is not walked again."""
        started = time.perf_counter()
        messages, memo = ctx.messages, ctx.table(chain_validator.MEMO)
        violations = chain_validator.violations_of(ctx)
        if violations:
            from rules.chain.call_ids import rule_named
            from rules.chain.repair_tool_chain import repair_messages

            messages, repairs = repair_messages(messages, memo=memo, rule=rule_named(ctx.call_ids))
            for item in repairs:
                report["repairs"].append(
                    {**item, "kind": "integrity_repair", "cause": item["kind"]}
                )
            report["warnings"].append(
                {
                    "kind": "integrity_repair",
                    "violations": violations[:20],
                    "count": len(violations),
                }
            )
        report["timings_ms"]["integrity_check"] = round((time.perf_counter() - started) * 1000, 3)
        return messages

    @staticmethod
    def _record_prefix(
        ctx: Context,
        hashes: list[str],
        messages: Messages,
        report: Report,
        tokens: int | None = None,
    ) -> SessionState:
        """prefix_reuse: share of the tokens that repeat the last request's prefix (``hashes``:
        the messages'). ``tokens``: ``count_messages(messages)`` when already known (the
        messages' sizes plus the 3 tokens that prime the reply, as both counters define it)."""
        previous = ctx.state.get(PREFIX_NAMESPACE) or {}
        prev_hashes: list[str] = previous.get("hashes", [])
        same = list(map(operator.eq, hashes, prev_hashes))  # stops at the shorter list
        shared = same.index(False) if False in same else len(same)
        reuse = None
        if prev_hashes:
            if tokens is None:
                tokens = ctx.tokens.count_messages(messages)
            total = tokens - 3
            if total:
                # the shared prefix is most of the request: size the rest, message by message
                # (no priming tokens; not a list for the counter to keep)
                rest = sum(map(ctx.tokens.count_message, messages[shared:]))
                reuse = round((total - rest) / total, 4)
        report["prefix_reuse"] = reuse
        report["prefix_shared_messages"] = shared
        return ctx.state.with_value(PREFIX_NAMESPACE, {"hashes": hashes})
