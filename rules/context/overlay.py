"""The overlay: pruning edits remembered per session, anchored to messages by content hash, and
replayed byte-for-byte on later requests (design section 4). An edit is data ({action, reason});
its text is rebuilt from the anchored message by pure functions here, so the same message and
edit always give the same bytes. Anchors that vanish from the conversation drop their edits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rules.activity.observations import Observation
from rules.base import Context, Message, RenderMemo, TokenCounter
from rules.context import digest, drop_names, evidence, prune_stages, shrink
from rules.context.capped import cap_of, capped_text
from rules.context.drop_names import CHOSEN_WAYS, NAMES_FIRST, NAMES_NONE, NAMES_WIDE
from rules.media import message_media_tokens
from rules.messages import (
    MEDIA_MARKS,
    PLACEHOLDER_PREFIX,
    call_name,
    content_hash,
    role,
    text_of,
    tool_calls,
    with_content,
)
from rules.redact import redact_text

ELIDE_ACTIONS = ("supersede", "mask")
MEMO = "anchors"  # ``Context.derived`` name: prune and inject share one list's anchors
INDEX_MEMO = "anchor_index"  # its ``Context.table``: an anchor list -> ``anchor_index``


def anchor_index(ctx: Context, anchor_list: list[str]) -> dict[str, int]:
    """Each anchor's position in ``anchor_list`` (anchors are unique), once per request for
    each list: prune's overlay and inject's blocks look their anchors up in the same one."""
    table = ctx.table(INDEX_MEMO)
    hit = table.get(id(anchor_list))
    if hit is not None and hit[0] is anchor_list:
        return hit[1]  # type: ignore[no-any-return]
    index = dict(zip(anchor_list, range(len(anchor_list)), strict=True))
    table[id(anchor_list)] = (anchor_list, index)
    return index


def anchors(messages: list[Message], hash_of: Callable[[Message], str] = content_hash) -> list[str]:
    """One anchor per message: its content hash chained with the previous message's, plus an
    occurrence number for repeated pairs. An identical later message (a second "continue") thus
    never takes over the anchor, and the edit, of an earlier copy that vanished: it follows a
    different message."""
    return anchors_of(list(map(hash_of, messages)))


def anchors_of(hashes: list[str]) -> list[str]:
    """``anchors`` of the messages with these content hashes."""
    return numbered([f"{h}.{p[:8]}" for h, p in zip(hashes, ["", *hashes], strict=False)])


def numbered(keys: list[str]) -> list[str]:
    """The anchors of these keys (a message's hash and its predecessor's)."""
    if len(set(keys)) == len(keys):
        return keys  # no pair repeats (the common case): no occurrence numbers
    seen: dict[str, int] = {}
    out = []
    for key in keys:
        n = seen.get(key, 0)
        out.append(f"{key}#{n}" if n else key)
        seen[key] = n + 1
    return out


def anchors_missing(value: Any, present: Container[str]) -> bool:
    """Whether a stored overlay has an edit or a drop whose anchor is not in ``present``."""
    if not isinstance(value, dict):
        return False
    edits = value.get("edits") or {}
    return any(a not in present for a in edits) or any(
        a not in present for a in value.get("dropped") or []
    )


@dataclass
class Overlay:
    edits: dict[str, dict[str, str]] = field(default_factory=dict)  # anchor -> {action, reason}
    dropped: list[str] = field(default_factory=list)  # anchors of dropped messages, in order
    compactions: int = 0
    # how dropped runs' lines name what they showed (``NAMES_*``); an overlay that dropped
    # messages under an older way keeps it (the bytes it forwarded)
    names: int = NAMES_WIDE
    # NAMES_CHOSEN, NAMES_WIDE: each dropped result's chosen names, as positions in its
    # ``digest._scan``
    chosen: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @classmethod
    def load(cls, value: Any, present: Container[str], keep_all: bool = False) -> Overlay:
        """The stored overlay, keeping only edits whose anchor is still in the conversation
        (all of them with ``keep_all``: the conversation is the overlay's own rendering)."""
        value = value if isinstance(value, dict) else {}
        edits = {a: e for a, e in (value.get("edits") or {}).items() if keep_all or a in present}
        dropped = [a for a in value.get("dropped") or [] if keep_all or a in present]
        stored = value.get("names")  # ``true``: the first way (older overlays); absent: none
        known = isinstance(stored, int) and NAMES_NONE <= stored <= NAMES_WIDE
        names = int(stored) if known else NAMES_NONE
        names = names if value.get("dropped") else NAMES_WIDE
        chosen = drop_names.load(value.get("chosen"), dropped) if names in CHOSEN_WAYS else {}
        return cls(edits, dropped, int(value.get("compactions", 0)), names, chosen)

    def to_json(self) -> dict[str, Any]:
        out = {"edits": self.edits, "dropped": self.dropped, "compactions": self.compactions}
        if self.names and self.dropped:  # the first way was stored as ``true``
            out["names"] = True if self.names == NAMES_FIRST else self.names
        if self.chosen and self.dropped:
            out["chosen"] = {a: list(p) for a, p in self.chosen.items()}
        return out


def key_args(obs: Observation | None) -> str:
    if obs is None:
        return ""
    a = obs.action
    if a.kind == "run" or (a.command and a.kind != "read"):
        cmd = a.command or a.target
        if len(cmd) > 80:  # redacted before the cut, which could leave a secret unrecognisable
            cmd = redact_text(cmd)
        return f"cmd: {cmd if len(cmd) <= 80 else cmd[:79] + '…'}"
    return f"path: {a.target}" if a.target else ""


def elided_text(
    message: Message, obs: Observation | None, reason: str, tokens: int, names: bool = False
) -> str:
    """One line that keeps the tool, key arguments (what gets it back), exit status and size;
    with ``names``, the first paths, identifiers and ids it showed (``digest``)."""
    tool = obs.action.tool if obs else "tool"
    facts = [f for f in (key_args(obs),) if f]
    if obs is not None and obs.exit_code is not None:
        facts.append(f"exit {obs.exit_code}")
    facts.append(f"{tokens:,} tokens")
    text = text_of(message.get("content")) if names else ""
    shown = digest.digest(text, *digest.sized(text)) if names else []
    showed = f"; it showed: {', '.join(shown)}" if shown else ""
    return f"{PLACEHOLDER_PREFIX} elided {tool} result ({', '.join(facts)}); {reason}{showed}]"


def dropped_text(
    messages: list[Message], names: int = NAMES_NONE, chosen: Sequence[str] = ()
) -> str:
    """The line standing for dropped messages; with ``names``, the paths, identifiers and ids
    their tool results showed (``NAMES_*``, ``digest``), so the agent can still name them:
    ``NAMES_CHOSEN``'s and ``NAMES_WIDE``'s are ``chosen`` (``drop_names.names_of``)."""
    calls = Counter(call_name(c) or "?" for m in messages for c in tool_calls(m))
    roles = Counter(role(m) for m in messages)
    what = ", ".join(f"{n} {r}" for r, n in sorted(roles.items()))
    tools = ", ".join(f"{name}×{n}" for name, n in sorted(calls.items()))
    shown: list[str] = []
    if names in CHOSEN_WAYS:
        shown = list(chosen)
    elif names:
        texts = [text_of(m.get("content")) for m in messages if role(m) == "tool"]
        count = drop_names.legacy_count_for(len(texts))  # a longer run showed more worth naming
        pick = digest.digest if names == NAMES_FIRST else digest.in_order
        shown = pick("\n".join(texts), count, 25 * count)
    return (
        f"{PLACEHOLDER_PREFIX} dropped {len(messages)} earlier messages ({what}"
        f"{'; tool calls: ' + tools if tools else ''}"
        f"{'; they showed: ' + ', '.join(shown) if shown else ''}) to fit the token budget]"
    )


_ELIDED = f"{PLACEHOLDER_PREFIX} elided "
_CAPPED = f"{PLACEHOLDER_PREFIX} capped: kept the first "
_CAPPED_LINE = f"\n{_CAPPED}"
_DROPPED = f"{PLACEHOLDER_PREFIX} dropped "


def is_rendered(message: Message) -> bool:
    """Whether the message is one ``render`` wrote (an elided or capped result, or a dropped
    run's line): a client never sends these, so a conversation holding one is prune's output."""
    r = role(message)
    if r == "assistant":
        return shrink.is_shrunk(message)
    if r == "tool":
        text = text_of(message.get("content"))
        return text.startswith((_ELIDED, _CAPPED)) or _CAPPED_LINE in text
    if r == "user":
        text = text_of(message.get("content"))
        return text.startswith(_DROPPED) and text.endswith(" to fit the token budget]")
    return False


def edit_key(
    message: Message,
    edit: dict[str, str],
    obs: Observation | None,
    tokens: TokenCounter,
    cap: int,
    hash_of: Callable[[Message], str] = content_hash,
) -> tuple[object, ...] | None:
    """Everything ``apply_edit`` renders from, as a key for ``Context.renders``: the message (its
    content hash), the edit's parameters, and the observation's facts for an elided result, or
    the result's size and the limit for a cap. None: nothing to keep (``keep`` is the message
    itself; an older elision without its stored size is counted by the request's encoding)."""
    action = edit["action"]
    if action == "shrink":
        return ("shrink", hash_of(message), edit["lines"], edit["chars"])
    if action in ELIDE_ACTIONS:
        stored = edit.get("tokens")
        if not stored:
            return None
        names = edit.get("digest")
        if obs is None:
            return ("elide", hash_of(message), edit["reason"], stored, names)
        a = obs.action  # what ``elided_text`` reads of it (strings: their hashes are kept)
        return (
            "elide", hash_of(message), edit["reason"], stored, names, a.tool, a.kind, a.command,
            a.target, obs.exit_code,
        )  # fmt: skip
    if action == "cap":  # its count depends on the encoding: in the key
        count = tokens.count_text(text_of(message.get("content")))
        return ("cap", hash_of(message), count, cap_of(edit, cap))
    return None


def apply_edit(
    message: Message,
    edit: dict[str, str],
    obs: Observation | None,
    tokens: TokenCounter,
    cap: int,
    memo: RenderMemo | None = None,
    hash_of: Callable[[Message], str] = content_hash,
) -> Message:
    """``message`` as ``edit`` renders it; through ``memo`` (``Context.renders``) when given, so
    an edit replayed unchanged is looked up instead of rendered again."""
    key = edit_key(message, edit, obs, tokens, cap, hash_of) if memo is not None else None
    if key is None or memo is None:
        return _apply_edit(message, edit, obs, tokens, cap)
    hit = memo.get(key)
    if hit is not None:
        return hit
    out = _apply_edit(message, edit, obs, tokens, cap)
    memo.put(key, out)
    return out


def result_size(message: Message, tokens: TokenCounter) -> int:
    """A result's tokens as its elision states them: its text's and its media's."""
    return tokens.count_text(text_of(message.get("content"))) + message_media_tokens(message)


def capped_size(message: Message, tokens: TokenCounter) -> int:
    """A result's tokens as its size cap weighs them: without its media, which a cap keeps."""
    return tokens.count_message(message) - message_media_tokens(message)


def _apply_edit(
    message: Message, edit: dict[str, str], obs: Observation | None, tokens: TokenCounter, cap: int
) -> Message:
    if edit["action"] == "shrink":  # its parameters stored with it: the replay is byte-identical
        return shrink.shrink_message(message, int(edit["lines"]), int(edit["chars"]))
    if edit["action"] in ELIDE_ACTIONS:
        stored = edit.get("tokens")  # counted when decided (older overlays lack it)
        size = int(stored) if stored else result_size(message, tokens)
        names = bool(edit.get("digest"))
        out = with_content(message, elided_text(message, obs, edit["reason"], size, names))
        for mark in MEDIA_MARKS:  # its images and documents are elided with it
            out.pop(mark, None)
        return out
    content = message.get("content")
    text = text_of(content)
    if edit["action"] == "cap":
        capped = capped_text(text, tokens.count_text(text), cap_of(edit, cap))
        # a cap cuts text: a result's images and files given as parts stay after it
        media = [p for p in content if not _is_text_part(p)] if isinstance(content, list) else []
        kept = [{"type": "text", "text": capped}, *media] if media else capped
        return with_content(message, kept)
    return message  # "keep": decided once, never capped later


def _is_text_part(part: Any) -> bool:
    return isinstance(part, dict) and isinstance(part.get("text"), str)


def render(
    messages: list[Message],
    anchor_list: list[str],
    overlay: Overlay,
    by_result: dict[int, Observation],
    tokens: TokenCounter,
    cap: int,
    placed: list[int] | None = None,
    memo: RenderMemo | None = None,
    hash_of: Callable[[Message], str] = content_hash,
    index: Mapping[str, int] | None = None,
) -> list[Message]:
    """The conversation with the overlay applied: edits in place, dropped runs as one line.
    Nothing from the current task turn on (``prune_stages.current_start``) is rendered dropped.
    ``placed`` receives, for each message of the result, the index of the message it renders
    (-1: a dropped run's line). ``memo`` (``Context.renders``): renderings of earlier requests,
    looked up by what made them (``hash_of``: the request's ``content_hash``)."""
    edits = overlay.edits
    if not overlay.dropped:  # edits in place: only the edited messages are visited
        out = list(messages)  # (nothing to apply is the common case until a result is capped)
        if edits:
            if index is None:  # each anchor's position (``anchor_index``, when the caller has it)
                index = dict(zip(anchor_list, range(len(anchor_list)), strict=True))
            for a, edit in edits.items():
                i = index.get(a)
                if i is not None:
                    out[i] = apply_edit(
                        messages[i], edit, by_result.get(i), tokens, cap, memo, hash_of
                    )
        if placed is not None:
            placed.extend(range(len(messages)))
        return out
    dropped = set(overlay.dropped)
    current = prune_stages.current_start(messages, evidence.task_start(messages))
    gone = _whole_turns(messages, {i for i in range(current) if anchor_list[i] in dropped})
    out = []
    run: list[int] = []
    for i, (m, a) in enumerate(zip(messages, anchor_list, strict=True)):
        if i in gone:
            run.append(i)
            continue
        if run:
            out.append(_dropped_line(messages, anchor_list, run, memo, overlay))
            if placed is not None:
                placed.append(-1)
            run = []
        found = edits.get(a)
        if found is not None:
            m = apply_edit(m, found, by_result.get(i), tokens, cap, memo, hash_of)
        out.append(m)
        if placed is not None:
            placed.append(i)
    if run:
        out.append(_dropped_line(messages, anchor_list, run, memo, overlay))
        if placed is not None:
            placed.append(-1)
    return out


def _whole_turns(messages: list[Message], drop: set[int]) -> set[int]:
    """``drop`` without any call whose result stays, or result whose call stays: a client that
    trimmed its own history can leave a dropped result whose call now has another anchor (its
    predecessor changed); dropping half a pair would break the chain."""
    calls: dict[Any, int] = {}
    for i in sorted(drop):
        for c in tool_calls(messages[i]):
            calls[c.get("id")] = i
    results: dict[Any, list[int]] = {}
    for i, m in enumerate(messages):
        if role(m) == "tool":
            results.setdefault(m.get("tool_call_id"), []).append(i)
    keep = set(drop)
    changed = True
    while changed:  # each pass un-drops something, or ends: at most len(drop) passes
        changed = False
        for i in sorted(keep):
            m = messages[i]
            if role(m) == "tool":
                owner = calls.get(m.get("tool_call_id"))
                partners = [] if owner is None else [owner]
                broken = owner is None or owner not in keep
            else:
                partners = [j for c in tool_calls(m) for j in results.get(c.get("id"), [])]
                broken = any(j not in keep for j in partners)
            if broken:
                keep.discard(i)
                keep.difference_update(partners)
                changed = True
    return keep


def _dropped_line(
    messages: list[Message],
    anchor_list: list[str],
    run: list[int],
    memo: RenderMemo | None,
    overlay: Overlay,
) -> Message:
    """The line standing for the dropped messages at indices ``run``. Their anchors hold their
    content hashes, all ``dropped_text`` reads with the names chosen of them: the memo's key."""
    names, anchors = overlay.names, [anchor_list[i] for i in run]
    chosen = overlay.chosen if names in CHOSEN_WAYS else {}
    picked = tuple(chosen.get(a, ()) for a in anchors) if chosen else ()
    key = ("dropped", names, *anchors, picked) if memo is not None else None
    if key is not None and memo is not None:
        hit = memo.get(key)
        if hit is not None:
            return hit
    run_messages = [messages[i] for i in run]
    count = drop_names.count_of_way(names)
    shown = drop_names.names_of(run_messages, anchors, chosen, count) if chosen else []
    line = {"role": "user", "content": dropped_text(run_messages, names, shown)}
    if key is not None and memo is not None:
        memo.put(key, line)
    return line
