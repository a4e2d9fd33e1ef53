"""The names a dropped run's line keeps (``NAMES_WIDE``): chosen at the compaction that
drops the run, among those its results showed that the rest of the forwarded prompt no longer
shows, and kept in the overlay as positions, so every later request renders the same line.

A dropped run's line names the paths, identifiers and ids its results showed, in the order shown,
so the agent can still copy them (``digest``). A name the prompt still shows elsewhere (the task
prompt, a result kept, a call's arguments, an earlier run's line) is not lost with the run: naming
it again spends one of the line's few places on it and leaves out a name that is lost. So the
compaction renders the prompt with the new runs naming nothing, takes every name that prompt
shows (``digest.names`` of each message's text and its calls' arguments), and each new run then
names, in the order its results showed them, the first of the others within its size (``16 + 4``
a result, at most 96, ``25`` characters each on average; a compaction whose line does not fit its
goal so names as many as the older ways, then none). The older ways (``NAMES_FIRST``,
``NAMES_IN_ORDER``, and ``NAMES_CHOSEN``: this module's at that count) name ``8 + 2`` a result,
at most 48 (``legacy_count_for``), as they did: an overlay keeps its way.

What is kept is each dropped result's chosen positions in its own ``digest._scan`` (integers:
nothing of the client's text is stored, so nothing stored needs redacting, and the line is
rebuilt from the client's message itself): the line is a pure function of the run's messages and
those positions. A run that later grows (a compaction drops the turns beside it) names what each
compaction chose for its own results. The session's first compaction to drop, when it cannot fit
with the names, names nothing, nor do its later runs (``take_back``)."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from rules.base import Message
from rules.context import digest
from rules.messages import call_arguments_text, role, text_of, tool_calls

# What a dropped run's line names: nothing; the first paths, then identifiers, then ids its
# results showed; their names in the order shown (``digest.in_order``); or those of them the rest
# of the prompt no longer showed when it was dropped (this module), at most ``legacy_count_for``
# (``NAMES_CHOSEN``) or ``count_for`` (``NAMES_WIDE``) of them
NAMES_NONE, NAMES_FIRST, NAMES_IN_ORDER, NAMES_CHOSEN, NAMES_WIDE = 0, 1, 2, 3, 4
CHOSEN_WAYS = frozenset({NAMES_CHOSEN, NAMES_WIDE})  # the ways kept as positions (``chosen``)


class Named(Protocol):
    """What this module reads and sets of an overlay (``overlay.Overlay``, which imports it)."""

    edits: dict[str, dict[str, str]]
    dropped: list[str]
    names: int
    chosen: dict[str, tuple[int, ...]]


Ov = TypeVar("Ov", bound=Named)

MAX_NAMES = 96  # a run's line names at most this many
CHARS_PER_NAME = 25


def count_for(results: int) -> int:
    """How many names a run of ``results`` tool results may name: a longer run showed more.
    Twice the older ways' (``legacy_count_for``; a name is about 7 tokens, and one a later call
    copies spares a re-read of its result): on whole sessions of the corpus 75.9% → 78.1% of the
    copied literals kept at ``share30`` (docs/performance.md)."""
    return min(16 + 4 * results, MAX_NAMES)


def legacy_count_for(results: int) -> int:
    """The count of the older ways (``NAMES_FIRST``, ``NAMES_IN_ORDER``, ``NAMES_CHOSEN``): kept,
    so a session whose overlay named runs so replays its bytes (a run a client's trimmed history
    shortens renders under its own way's count)."""
    return min(8 + 2 * results, 48)


def count_of_way(names: int) -> Callable[[int], int]:
    """The count a way of naming (``NAMES_*``) names a run's results within."""
    return count_for if names == NAMES_WIDE else legacy_count_for


def shown_in(messages: Iterable[Message]) -> set[str]:
    """Every name the messages show: their texts' and their calls' arguments'."""
    out: set[str] = set()
    for m in messages:
        text = text_of(m.get("content"))
        if text:
            out |= digest.names(text)
        for call in tool_calls(m):
            out |= digest.names(call_arguments_text(call))
    return out


def choose(
    texts: Sequence[str],
    visible: set[str] | frozenset[str],
    results: int | None = None,
    named: Sequence[str] = (),
    count_of: Callable[[int], int] = count_for,
) -> list[tuple[int, ...]]:
    """For the results ``texts`` a compaction drops in one run, in order: the positions (in
    each text's ``digest._scan``) of the names its line keeps: in the order shown, not shown
    elsewhere (``visible``), each once, within ``count_of(results)`` names (``results``: the
    run's results, those dropped before included; all of them ``texts`` when None) and 25
    characters a name, ``named`` (what the run's line names already) counted in both; a name
    too long for what is left does not crowd out the shorter ones after it. ``count_of``: the
    count for a run's results (``legacy_count_for``: the fewer names a compaction tries when
    the line does not fit with ``count_for``'s)."""
    count = count_of(len(texts) if results is None else results)
    max_chars = CHARS_PER_NAME * count
    taken: set[str] = set(named)
    used = sum(len(word) + 2 for word in taken)
    out: list[tuple[int, ...]] = []
    for text in texts:
        picked: list[int] = []
        for n, (_, word) in enumerate(digest._scan(text)):
            if len(taken) >= count:
                break
            if word in taken or word in visible or used + len(word) + 2 > max_chars:
                continue
            taken.add(word)
            picked.append(n)
            used += len(word) + 2
        out.append(tuple(picked))
    return out


def named_view(
    trial: Ov,
    before: Ov,
    dropped: set[str],
    present: Container[str],
    messages: Sequence[Message],
    anchors: Sequence[str],
    render: Callable[[Ov], tuple[list[Message], Sequence[int]]],
    count_of: Callable[[int], int] | None = None,
) -> list[Message]:
    """``trial``, a compaction of ``before`` whose drops are ``dropped``, rendered (``render``:
    the view and the message each of its messages renders), its new runs named first: only the
    drops still sent (``present``) keep their positions (an own-output overlay keeps drops of
    messages no longer sent), and what is new is told by set, not by count."""
    trial.chosen = {a: p for a, p in trial.chosen.items() if a in dropped and a in present}
    view, placed = render(trial)
    if trial.names not in CHOSEN_WAYS or dropped.issubset(before.dropped):
        return view
    gone = set(before.dropped)
    count = count_of or count_of_way(trial.names)
    trial.chosen.update(chosen_for(messages, anchors, view, placed, gone, trial.chosen, count))
    return render(trial)[0]


def take_back(trial: Named, before: Named) -> None:
    """A compaction still over its goal with every step taken: the digests it added to masked
    results go (what they name is worth less than fitting), and when it is the session's first
    to drop messages, its runs' lines name nothing, nor do the session's later ones."""
    for a, edit in trial.edits.items():
        if edit.get("digest") and a not in before.edits:
            trial.edits[a] = {k: v for k, v in edit.items() if k != "digest"}
    if not before.dropped:
        trial.names, trial.chosen = NAMES_NONE, {}


def chosen_for(
    messages: Sequence[Message],
    anchors: Sequence[str],
    view: Sequence[Message],
    placed: Sequence[int],
    before: set[str],
    chosen: Mapping[str, Sequence[int]],
    count_of: Callable[[int], int] = count_for,
) -> dict[str, tuple[int, ...]]:
    """The positions each result a compaction drops anew keeps, by its anchor (none: it names
    nothing): ``view`` is the compacted prompt with the new runs naming nothing, ``placed`` the
    message each of its messages renders (``overlay.render``; a run is the messages between two
    placed ones), ``before`` the anchors dropped before this compaction, ``chosen`` the names
    their results keep (a run that grows names at most as many as one dropped whole)."""
    shown = set(placed)
    visible = shown_in(view)
    out: dict[str, tuple[int, ...]] = {}
    run: list[int] = []
    for i in range(len(messages) + 1):
        if i < len(messages) and i not in shown:
            run.append(i)
            continue
        results = [j for j in run if role(messages[j]) == "tool"]
        fresh = [j for j in results if anchors[j] not in before]
        texts = [text_of(messages[j].get("content")) for j in fresh]
        named = names_of([messages[j] for j in run], [anchors[j] for j in run], chosen, count_of)
        picks = choose(texts, visible, len(results), named, count_of)
        for j, picked in zip(fresh, picks, strict=True):
            if picked:
                out[anchors[j]] = picked
        run = []
    return out


def names_of(
    messages: Sequence[Message],
    anchors: Sequence[str],
    chosen: Mapping[str, Sequence[int]],
    count_of: Callable[[int], int] = count_for,
) -> list[str]:
    """The names a run's line keeps: each of its results' chosen positions (by its anchor),
    in order, each name once, at most ``count_of`` the run's results (its way's count)."""
    out: list[str] = []
    seen: set[str] = set()
    limit = count_of(sum(role(m) == "tool" for m in messages))
    for m, a in zip(messages, anchors, strict=True):
        positions = chosen.get(a)
        if not positions or role(m) != "tool":
            continue
        scan = digest._scan(text_of(m.get("content")))
        for n in positions:
            if n < len(scan) and scan[n][1] not in seen and len(out) < limit:
                seen.add(scan[n][1])
                out.append(scan[n][1])
    return out


def load(value: object, dropped: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """The stored positions of the dropped results ``dropped`` (an object of lists of
    non-negative integers); anything else is left out (its result names nothing)."""
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for a in dropped:
        v = value.get(a)
        if (
            isinstance(v, list)
            and 0 < len(v) <= MAX_NAMES
            and all(type(n) is int and n >= 0 for n in v)
        ):
            out[a] = tuple(v)
    return out
