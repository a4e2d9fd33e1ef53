"""Writing a changed text back onto the client's own blocks or parts, keeping what is theirs.

A lowered text stands for one or more text blocks (Anthropic ``text``, Responses ``input_text`` /
``output_text``). When the rules changed it, the change goes back with the least disturbance:
- an appended text (inject's block, a note) becomes a block of its own after the client's, so
  their bytes and any ``cache_control`` on them stay as sent;
- a replaced text (an elided result, clipped prose) takes the first text block's place, with
  that block's other keys; the other text blocks go; non-text blocks stay where they were.

A tool result's blocks are lowered as their texts joined by line breaks (``text_of``), and a
change to that text goes back block by block (``patch_texts``): each text block takes its own
lines of the new text, in place, with its other keys; non-text blocks stay where they were. A
block read for the text of its own ``content`` (Anthropic's ``search_result``) takes its lines
there, in its nested text blocks, so its text is never sent twice (once as it was, once edited
beside it)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, TypeVar

from rules.messages import text_of

K = TypeVar("K", bound=Hashable)

Block = dict[str, Any]
NewBlock = Callable[[str], Block]


def appended(old: str, new: str) -> str | None:
    """What ``new`` adds after ``old``, without the separating blank line, when it only adds."""
    if len(new) > len(old) and new.startswith(old):
        return new[len(old) :].lstrip("\n")
    return None


def patch_blocks(
    blocks: list[Any], old: str, new: str, is_text: Callable[[Any], bool], make: NewBlock
) -> list[Any]:
    """``blocks`` (the client's) with their text changed from ``old`` to ``new``."""
    if new == old:
        return blocks
    suffix = appended(old, new)
    if suffix is not None:
        return [*blocks, make(suffix)] if suffix.strip() else blocks
    out: list[Any] = []
    placed: int | None = None  # where the first text block's replacement stands in ``out``
    for b in blocks:
        if _nested(b) and not is_text(b) and placed is None and new.strip():
            # a search result's text is in ``new``: a text block stands for it, in its place
            placed = len(out)
            out.append(
                make(new) | ({"cache_control": b["cache_control"]} if "cache_control" in b else {})
            )
            continue
        if _nested(b) and not is_text(b):
            if (
                "cache_control" in b
                and placed is not None
                and placed >= 0
                and "cache_control" not in out[placed]
            ):
                out[placed] = {**out[placed], "cache_control": b["cache_control"]}
            continue
        if not is_text(b):
            out.append(b)
        elif placed is None:
            placed = len(out)
            if new.strip():
                out.append({**b, "text": new})
            else:
                placed = -1
        elif "cache_control" in b and placed >= 0 and "cache_control" not in out[placed]:
            # a later block's breakpoint stays after the text now standing for it
            out[placed] = {**out[placed], "cache_control": b["cache_control"]}
    if placed is None and new.strip():
        out.append(make(new))
    return out


def patch_parts(
    blocks: list[Any],
    old: list[Any],
    new: list[Any],
    is_text: Callable[[Any], bool],
    make: NewBlock,
) -> list[Any]:
    """``blocks`` lowered part for part as ``old`` (a list content), now ``new``: unchanged parts
    keep their block, changed texts are written into theirs, added text parts become blocks."""
    out: list[Any] = []
    for k, part in enumerate(new):
        text = part.get("text") if isinstance(part, dict) else None
        if k < len(old) and k < len(blocks):
            if part == old[k] or not isinstance(text, str) or not is_text(blocks[k]):
                out.append(blocks[k])
            elif text.strip():
                out.append({**blocks[k], "text": text})
        elif isinstance(text, str) and text.strip():
            out.append(make(text))
    return out


def patch_texts(
    blocks: list[Any], old: str, new: str, is_text: Callable[[Any], bool], make: NewBlock
) -> list[Any]:
    """``blocks`` (the client's), lowered as ``old`` (``text_of``: their texts joined by line
    breaks), with that text changed to ``new``. An appended text is a block of its own after
    theirs. Otherwise each block takes its lines of ``new``: line for line when the number of
    lines is the same (an encoding fix, a redaction), else the lines the two texts share at the
    start and at the end stay in their blocks and the lines between (an elision's, a cut's) go
    to the block where the change begins. A text block left without lines goes, its
    ``cache_control`` taken by the text block before it (the breakpoint stays after the text
    that now stands there). Where the blocks do not spell ``old``, or the change touches text
    that is not a text block's own, it is ``patch_blocks``."""
    if new == old:
        return blocks
    suffix = appended(old, new)
    if suffix is not None:
        return [*blocks, make(suffix)] if suffix.strip() else blocks
    spans = [(k, t) for k, b in enumerate(blocks) if (t := _segment(b)) is not None]
    out = _per_block(blocks, spans, old, new, is_text, "\n")
    return out if out is not None else patch_blocks(blocks, old, new, is_text, make)


def patch_joined(
    blocks: list[Any],
    old: str,
    new: str,
    is_text: Callable[[Any], bool],
    make: NewBlock,
    sep: str = "\n\n",
) -> list[Any]:
    """``blocks`` (the client's), lowered as ``old``: their text blocks' texts joined by ``sep``
    (a system prompt's, a turn's text blocks), with that text changed to ``new``, block by block
    as ``patch_texts`` does: each text block keeps its place and its keys (``cache_control``);
    an appended text is a block of its own after theirs. Where a change spans the line breaks
    between two blocks, or the blocks do not spell ``old``, it is ``patch_blocks``."""
    if new == old:
        return blocks
    suffix = appended(old, new)
    if suffix is not None:
        return [*blocks, make(suffix)] if suffix.strip() else blocks
    spans = [(k, b["text"]) for k, b in enumerate(blocks) if is_text(b)]
    out = _per_block(blocks, spans, old, new, is_text, sep)
    if out is None and any(not t for _, t in spans):  # a reading that skips empty blocks
        out = _per_block(blocks, [(k, t) for k, t in spans if t], old, new, is_text, sep)
    return out if out is not None else patch_blocks(blocks, old, new, is_text, make)


def _per_block(
    blocks: list[Any],
    spans: list[tuple[int, str]],
    old: str,
    new: str,
    is_text: Callable[[Any], bool],
    sep: str,
) -> list[Any] | None:
    """``blocks`` with each span's block (``spans``: index and text, joined by ``sep``, a run of
    line breaks, spelling ``old``) given its lines of ``new`` (None: it cannot be done so)."""
    if not spans or sep.strip("\n") or sep.join(t for _, t in spans) != old:
        return None
    gap = len(sep) - 1  # the empty lines between two spans
    counts: list[int] = []
    for n, (_, t) in enumerate(spans):
        if n and gap:
            counts.append(gap)
        counts.append(t.count("\n") + 1)
    lines = _lines_by_segment(counts, old, new)
    if gap:  # the blank lines between blocks must stay blank lines, else the change spans them
        if any(lines[at] != [""] * gap for at in range(1, len(lines), 2)):
            return None
        lines = lines[::2]
    texts: dict[int, Any] = {}  # a changed block's replacement (None: it goes)
    for (k, t), mine in zip(spans, lines, strict=True):
        text = None if mine is None else "\n".join(mine)
        if text != t:
            block = blocks[k]
            if text is None or not text.strip():
                texts[k] = None
            elif is_text(block):
                texts[k] = {**block, "text": text}
            elif _nested(block):  # a search result's text: written back into its content
                inner = block["content"]
                if isinstance(inner, str):
                    texts[k] = {**block, "content": text}
                else:
                    texts[k] = {**block, "content": _patch_nested(inner, t, text, is_text)}
                    if texts[k]["content"] is None:
                        return None
            else:
                return None
    out: list[Any] = []
    last_text: int | None = None  # the place in ``out`` of the last text block kept
    for k, b in enumerate(blocks):
        if k not in texts:
            if is_text(b) or _nested(b):
                last_text = len(out)
            out.append(b)
            continue
        replaced = texts[k]
        if replaced is not None:
            last_text = len(out)
            out.append(replaced)
        elif (
            "cache_control" in b and last_text is not None and "cache_control" not in out[last_text]
        ):
            out[last_text] = {**out[last_text], "cache_control": b["cache_control"]}
    return out


def _nested(block: Any) -> bool:
    """Whether ``block`` is read for the text of its own ``content`` (Anthropic's
    ``search_result``), not a ``text`` of its own."""
    return (
        isinstance(block, dict)
        and not isinstance(block.get("text"), str)
        and isinstance(block.get("content"), (str, list))
    )


def _patch_nested(
    inner: list[Any], old: str, new: str, is_text: Callable[[Any], bool]
) -> list[Any] | None:
    """A nested content list's blocks with their text changed from ``old`` to ``new``, each
    keeping its own lines; None when that cannot be done in place (no block is added there)."""
    spans = [(k, t) for k, b in enumerate(inner) if (t := _segment(b)) is not None]
    patched = _per_block(inner, spans, old, new, is_text, "\n")
    if not patched:  # nothing left, or not placeable: a search result holds text blocks only
        return None
    return patched


def _segment(block: Any) -> str | None:
    """What ``text_of`` reads of one block (None: nothing)."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict):
        text = block.get("text")
        if isinstance(text, str):
            return text
        if isinstance(block.get("content"), (str, list)):
            return text_of(block["content"])
    return None


def _lines_by_segment(counts: list[int], old: str, new: str) -> list[list[str] | None]:
    """The lines of ``new`` each segment of ``old`` (``counts``: its segments' line counts, in
    order) takes; None: none."""
    new_lines = new.split("\n")
    n_old, n_new = sum(counts), len(new_lines)
    starts = [sum(counts[:i]) for i in range(len(counts))]
    if n_old == n_new:
        return [new_lines[a : a + c] for a, c in zip(starts, counts, strict=True)]
    old_lines = old.split("\n")
    most = min(n_old, n_new)
    head = 0
    while head < most and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while tail < most - head and old_lines[n_old - 1 - tail] == new_lines[n_new - 1 - tail]:
        tail += 1
    cut_end = n_old - tail  # old lines [head, cut_end) became new lines [head, n_new - tail)
    at = head if head < cut_end else max(head - 1, 0)  # the line the change begins at
    out: list[list[str] | None] = []
    for a, c in zip(starts, counts, strict=True):
        b = a + c
        mine = new_lines[a : min(b, head)] if a < head else []
        if a <= at < b:
            mine.extend(new_lines[head : n_new - tail])
        if b > cut_end:
            mine.extend(new_lines[max(a, cut_end) - n_old + n_new : b - n_old + n_new])
        out.append(mine or None)
    return out


def matched_by_id(
    sources: Iterable[tuple[K, dict[str, Any]]], calls: list[dict[str, Any]]
) -> Iterator[tuple[K, dict[str, Any]]]:
    """Each source call (a key, its lowered call) with the first output call of its id not
    taken yet: a call the rules kept stands for one source call, however many share its id.
    A source call with no output call of its id left takes the first output call of an id no
    source call has, with its name and arguments: the one the rules renamed (an id reused)
    where they dropped others of its turn (a runaway turn keeps its first call), so it keeps
    its block or part and what rides on it (a Gemini thought signature, an item's id)."""
    sources = list(sources)
    free: dict[str, list[dict[str, Any]]] = {}
    for c in calls:
        free.setdefault(_id_key(c.get("id")), []).append(c)
    known = {_id_key(call.get("id")) for _, call in sources}
    renamed = [c for c in calls if _id_key(c.get("id")) not in known]
    for key, call in sources:
        queue = free.get(_id_key(call.get("id")))
        if queue:
            yield key, queue.pop(0)
            continue
        same = _function(call)
        for n, c in enumerate(renamed):
            if _function(c) == same:
                yield key, renamed.pop(n)
                break


def _function(call: dict[str, Any]) -> tuple[Any, Any]:
    fn = call.get("function")
    return (fn.get("name"), fn.get("arguments")) if isinstance(fn, dict) else (None, None)


def _id_key(value: Any) -> str:
    """An id as a dict key (a client's may be any JSON value)."""
    return value if isinstance(value, str) else repr(value)
