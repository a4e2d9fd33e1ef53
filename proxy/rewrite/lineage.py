"""State follows the conversation, not only its name. What the rules derive from a history (the
entities, the working set, the blocks inject forwarded, the stored turns) serves a request only
if the request's history extends that history; a fork (a rewind, an edited earlier message, a
``--continue`` from an older turn, two conversations that start alike under one name) never sees
another branch's state.

A checkpoint is the state after a request, keyed by its history: the number ``n`` of messages
it held and a hash chained over their content hashes (in the rules' chat view, which reads
cache marks and a re-serialised block list alike). The stored state is the head checkpoint;
``_lineage`` holds the head's key and up to ``MAX_TIPS`` other branches' tips. A request
resumes from the longest checkpoint that is a prefix of its own history, head or tip; with none
it starts from nothing, and the rules derive the branch's state from the history it carries.

What is kept session-wide, whatever the branch: what is anchored to message content and so
applies only where that content is in the request (prune's overlay, which keeps another
conversation's edits aside: ``rules.context.overlay_away``), prune's schedule (kept per
conversation root: ``rules.context.session_roots``), the budget a session was told its floor is
above (``budget_floor``: said once a session, not once a branch), and the proxy's view of the
provider's cache (``_prefix``). A lone user turn (a stateless client) keeps
the stored turns (``history``), which history restore puts before it.

A sibling of the head (the head's history but its last message: a regenerated or edited last
turn, two calls an agent makes from one context) carries what was forwarded inside the history
they share: inject's blocks and break_loops' notes, anchored to the messages they were placed on.
Those bytes are the provider's cached prefix, and the rules replay each one whose message the
request holds (the head's last message, which the sibling does not hold, takes its own along).

Bounded: at most ``MAX_TIPS`` tips of at most ``MAX_TIP_BYTES`` (serialised) each: the newest
``MAX_TIPS // 2``, then the longest of the rest (a conversation's tip outlives a burst of one-turn
side calls under its name: Claude Code's helper calls, a sub-agent's)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from proxy.principals import split_scoped
from proxy.protocols.base import TAG
from rules.base import Ancestor, Context, Message, SessionState, content_hash, hash_bytes
from rules.context import budget_floor, prune, sticky
from rules.entities import history_restore
from rules.loops import break_loops
from rules.messages import role

NAMESPACE = "_lineage"
RESUME_MEMO = "lineage_resume"  # ``Context.recall`` name: a list, its stored lineage -> its key
PREFIX_NAMESPACE = "_prefix"  # hashes and sizes of the previous forwarded request's messages
# namespaces kept across branches (see above)
SHARED = frozenset(
    {
        prune.NAMESPACE,
        prune.SESSION,
        prune.CARRYING,
        PREFIX_NAMESPACE,
        NAMESPACE,
        budget_floor.NAMESPACE,
    }
)
HISTORY = history_restore.NAMESPACE
# what a sibling carries, and the key its entries are told apart by
ANCHORED = {sticky.NAMESPACE: "blocks", break_loops.NAMESPACE: "notes"}
MAX_TIPS = 4
MAX_TIP_BYTES = 64 * 1024
_SYSTEM_ROLES = ("system", "developer")  # not a conversation's opening message

Key = tuple[int, str]  # (messages, chained hash)


def chain(hashes: Sequence[str], n: int) -> str:
    """The hash chained over the first ``n`` content hashes."""
    return hashlib.blake2b("\x00".join(hashes[:n]).encode(), digest_size=12).hexdigest()


def history_hashes(ctx: Context) -> list[str]:
    """The content hashes of the client's messages (the runner's records know them); a message
    orjson refuses (a lone surrogate) is hashed by its repr instead."""
    try:
        return ctx.hashes_of(ctx.original_messages)
    except TypeError:
        out = []
        for m in ctx.original_messages:
            try:
                out.append(ctx.hash_of(m))
            except TypeError:
                out.append(hash_bytes(repr(m).encode("utf-8", "surrogatepass")))
        return out


def key_of(hashes: Sequence[str], messages: Sequence[Message] = ()) -> list[Any]:
    """A history's checkpoint key, as stored: its length and chained hash, then (``messages``
    given) the chain of all but its last message and that message's hash without its
    provenance tag (see ``_retagged``)."""
    n = len(hashes)
    return [n, chain(hashes, n), *_last_facts(hashes, messages)]


def _untagged(message: Message, tagged_hash: str) -> str:
    """The message's content hash without its provenance tag (``tagged_hash`` when it has none:
    a chat client's messages, and most of the others')."""
    if TAG not in message:
        return tagged_hash
    return content_hash({k: v for k, v in message.items() if k != TAG})


def _last_facts(
    hashes: Sequence[str], messages: Sequence[Message], prev: str | None = None
) -> list[str]:
    """The chain of all but the last message (``prev`` when already hashed), the last
    message's untagged hash and the opening's (``_opening``)."""
    n = len(hashes)
    if not n or len(messages) != n or not isinstance(messages[-1], dict):
        return []
    last = _untagged(messages[-1], hashes[-1])
    return [chain(hashes, n - 1) if prev is None else prev, last, _opening(hashes, messages)]


def _opening(hashes: Sequence[str], messages: Sequence[Message]) -> str:
    """The hash of the history's first message past the system ones ("" with none): a history
    that no longer holds it is a new conversation under the session's name, not a fork of it."""
    for h, m in zip(hashes, messages, strict=False):
        if isinstance(m, dict) and role(m) not in _SYSTEM_ROLES:
            return h
    return ""


def _retagged(hashes: Sequence[str], head: Sequence[Any], messages: Sequence[Message]) -> bool:
    """Whether the history holds the head's messages, the last one's provenance tag aside: an
    adapter tags a message by where it came from in the client's body (Messages: a block of a
    list, or a string), and a client that moves its cache mark off its last turn resends it as
    a string. Same history, same branch."""
    n = head[0]
    if len(head) < 4 or not isinstance(n, int) or not 1 <= n <= min(len(hashes), len(messages)):
        return False
    last = messages[n - 1]
    if not isinstance(last, dict) or chain(hashes, n - 1) != head[2]:
        return False
    return _untagged(last, hashes[n - 1]) == head[3]


def _head_and_key(
    hashes: Sequence[str], head: Sequence[Any], messages: Sequence[Message] = ()
) -> tuple[bool, list[Any]]:
    """Whether the history extends ``head``, and the history's own key: one pass of the hash
    over the history (the head's prefix, the rest but the last message, the last)."""
    n = head[0] if isinstance(head[0], int) and 0 <= head[0] <= len(hashes) else None
    if n is None:
        return False, key_of(hashes, messages)
    total = len(hashes)
    h = hashlib.blake2b("\x00".join(hashes[:n]).encode(), digest_size=12)
    extends = h.copy().hexdigest() == head[1]
    prev = None  # the chain of all but the last message, when the pass goes by it
    if n < total:
        rest = hashes[n : total - 1]
        if rest:
            h.update(("\x00" if n else "").encode() + "\x00".join(rest).encode())
        prev = h.copy().hexdigest()
        h.update(("\x00" if total > 1 else "").encode() + hashes[-1].encode())
    return extends, [total, h.hexdigest(), *_last_facts(hashes, messages, prev)]


def _extends(hashes: Sequence[str], key: Sequence[Any]) -> bool:
    n = key[0]
    return isinstance(n, int) and 0 <= n <= len(hashes) and chain(hashes, n) == key[1]


def resume(
    state: SessionState, hashes: Sequence[str], messages: Sequence[Message]
) -> tuple[SessionState, dict[str, Any] | None, list[Any]]:
    """The state a request whose ``messages`` have these content hashes runs on; on a fork, what it
    resumed from (for the report), the state's ``_lineage`` then keeping the branch left as a
    tip; and the request's own key, for ``record``. A state stored without a lineage is taken
    as it is."""
    lineage = state.get(NAMESPACE)
    head = lineage.get("head") if isinstance(lineage, dict) else None
    if not isinstance(head, list) or len(head) < 2:
        return state, None, key_of(hashes, messages)
    extends, key = _head_and_key(hashes, head, messages)
    if extends or _retagged(hashes, head, messages):
        return state, None, key
    tips: list[list[Any]] = [t for t in lineage.get("tips") or [] if isinstance(t, list)]
    best = max(
        (t for t in tips if len(t) == 3 and _extends(hashes, t)),
        key=lambda t: int(t[0]),
        default=None,
    )
    left = {k: v for k, v in state.data.items() if k not in SHARED}
    tips = [t for t in tips if t is not best]
    if left:
        tips.append([head[0], head[1], left])
    branch: dict[str, Any] = dict(best[2]) if best is not None else {}
    if _sibling(hashes, head) and (best is None or int(best[0]) < head[0] - 1):
        for name, entries in ANCHORED.items():
            carried = _carried(state.data.get(name), branch.get(name), entries)
            if carried is not None:
                branch[name] = carried
    if HISTORY in state.data and history_restore.is_lone_turn(messages):
        branch[HISTORY] = state.data[HISTORY]
    shared = {k: v for k, v in state.data.items() if k in SHARED}
    shared[NAMESPACE] = {"head": head, "tips": _bounded(tips)}
    resumed = {"from": "tip" if best is not None else "none", "head_messages": head[0]}
    if best is not None:
        resumed["tip_messages"] = best[0]
    return SessionState({**branch, **shared}), resumed, key


def _sibling(hashes: Sequence[str], head: Sequence[Any]) -> bool:
    """Whether the history holds all of the head's but its last message (``_last_facts``)."""
    n = head[0]
    return (
        len(head) >= 4
        and isinstance(n, int)
        and 2 <= n <= len(hashes) + 1
        and chain(hashes, n - 1) == head[2]
    )


def _carried(head: Any, branch: Any, entries: str) -> dict[str, Any] | None:
    """The head's anchored entries (``entries``: a list in each namespace's value) beside the
    branch's own, each once; None when the head has none to add."""
    theirs = head.get(entries) if isinstance(head, dict) else None
    if not isinstance(theirs, list) or not theirs:
        return None
    mine = branch.get(entries) if isinstance(branch, dict) else None
    if not isinstance(mine, list) or not mine:
        return dict(head)  # the head's whole value: what it says it showed is judged by the rule
    have = {orjson.dumps(e) for e in mine}
    extra = [e for e in theirs if orjson.dumps(e) not in have]
    if not extra:
        return None
    merged = [*mine, *extra]
    value = {**branch, entries: merged}
    if "tokens" in value:  # inject's: what its blocks weigh, read by prune
        value["tokens"] = sum(int(e.get("tokens", 0)) for e in merged if isinstance(e, dict))
    return value


def resume_of(
    ctx: Context, hashes: Sequence[str]
) -> tuple[SessionState, dict[str, Any] | None, list[Any]]:
    """``resume(ctx.state, hashes, ctx.original_messages)`` for the client's messages (``hashes``
    theirs): no fork is a function of the messages and the stored lineage alone, so its key is
    kept (``Context.recall``) for a list of the very same messages on the very same lineage (a
    resent body: the chained hashes are not worked out again)."""
    lineage = ctx.state.get(NAMESPACE)
    mine = ctx.messages is ctx.original_messages  # what ``recall`` compares
    if mine:
        found, key = ctx.recall(RESUME_MEMO, (lineage,))
        if found:
            return ctx.state, None, key
    state, fork, key = resume(ctx.state, hashes, ctx.original_messages)
    if mine and fork is None and state is ctx.state:
        ctx.keep(RESUME_MEMO, (lineage,), key)
    return state, fork, key


def _bounded(tips: list[list[Any]]) -> list[list[Any]]:
    """At most ``MAX_TIPS`` tips that fit ``MAX_TIP_BYTES`` each (sized at each fork): the newest
    ``MAX_TIPS // 2``, then the longest histories of the rest (the newer of two alike), in the
    order they came."""
    fitting = [i for i, tip in enumerate(tips) if len(orjson.dumps(tip[2])) <= MAX_TIP_BYTES]
    newest = fitting[-(MAX_TIPS // 2) :] if MAX_TIPS // 2 else []
    rest = [i for i in fitting if i not in newest]
    rest.sort(key=lambda i: (_length(tips[i]), i), reverse=True)
    chosen = set(newest) | set(rest[: MAX_TIPS - len(newest)])
    return [tip for i, tip in enumerate(tips) if i in chosen]


def _length(tip: list[Any]) -> int:
    return tip[0] if isinstance(tip[0], int) else 0


def record(state: SessionState, key: list[Any]) -> SessionState:
    """The state to store after a request whose history has this key (``resume``'s)."""
    lineage = state.get(NAMESPACE)
    tips = lineage.get("tips") if isinstance(lineage, dict) else None
    value: dict[str, Any] = {"head": key}
    if tips:
        value["tips"] = tips
    if value == lineage:
        return state
    return state.with_value(NAMESPACE, value)


def _reopened(head: Sequence[Any], hashes: Sequence[str], messages: Sequence[Message]) -> bool:
    """Whether the history no longer holds the head's opening message (``_opening``; a head
    stored without one: not known)."""
    if len(head) < 5 or not isinstance(head[4], str) or not head[4] or len(hashes) != len(messages):
        return False
    return head[4] not in hashes


def forked(ctx: Context, resumed: SessionState, hashes: Sequence[str] = ()) -> Context:
    """``ctx`` on its branch's state after a fork; a side conversation's (``lead_of``) with the
    branch it left as its nearest ancestor, ``<session> (lead)``, its own ancestors behind it."""
    lead = lead_of(ctx.state, resumed, ctx.original_messages, hashes)
    if lead is None:
        return ctx.evolve(state=resumed)
    name = f"{split_scoped(ctx.session_id)[1]} (lead)"
    parents = tuple(Ancestor(a.session_id, a.state, a.depth + 1) for a in ctx.ancestors)
    return ctx.evolve(state=resumed, ancestors=(Ancestor(name, lead, 1), *parents))


def lead_of(
    stored: SessionState,
    resumed: SessionState,
    messages: Sequence[Message],
    hashes: Sequence[str] = (),
) -> SessionState | None:
    """The branch a side conversation under the same session id left (Claude Code runs its
    sub-agents under the lead's session id, with no ``X-Parent-Session-Id``): the stored head's
    own state, when this request forked off it as a new conversation's first request does (its
    system messages and one user message: a sub-agent's prompt). Its references then search
    what the lead made, as a sub-agent's named parent's would be; None otherwise (an edited or
    regenerated turn of the conversation forks with its history, and keeps to its branch).

    So does a conversation the client compacted (Claude Code's /compact and auto-compact,
    Codex's compact): a summary in place of the whole history, under the same session id, no
    longer holds the head's opening message (``_reopened``); what was made before is still
    there."""
    lineage = stored.get(NAMESPACE)
    head = lineage.get("head") if isinstance(lineage, dict) else None
    if not isinstance(head, list) or not head or not isinstance(head[0], int):
        return None
    if resumed is stored:
        return None
    lone = len(messages) < head[0] and history_restore.is_lone_turn(messages)
    if not lone and not _reopened(head, hashes, messages):
        return None
    left = {k: v for k, v in stored.data.items() if k not in SHARED}
    return SessionState(left) if left else None
