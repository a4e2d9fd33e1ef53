"""Runs of messages Anthropic reads as one, for ``anthropic_mend``: a user's messages after a
model's turn holding its results (merged into the first), and an assistant's messages of one
turn (merged where one before the last holds a call). Each merge is reported as a repair."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from proxy.protocols.anthropic_parts import as_list


def repair(kind: str, index: int, action: str) -> dict[str, Any]:
    return {"kind": kind, "index": index, "tool_call_id": None, "action": action}


def is_user(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "user"


def holds_result(m: Any) -> bool:
    content = m.get("content") if is_user(m) else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


Merged = tuple[list[Any], list[int], list[dict[str, Any]]]


def merged_result_runs(messages: list[Any]) -> Merged:
    """``messages`` with each run of user messages after a model's turn merged into its first
    where a later one of the run holds a ``tool_result`` (the results may answer that turn's
    calls; any other is an orphan the chain repair makes text, and the task's first message is
    never merged into); the client's index of each message out, and the repairs."""

    def merge(i: int, end: int) -> bool:
        after_model = i > 0 and _assistant(messages[i - 1])
        return after_model and any(holds_result(m) for m in messages[i + 1 : end])

    return _merged_runs(messages, is_user, merge, "results_split", "user")


def merged_call_turns(messages: list[Any]) -> Merged:
    """``messages`` with each run of assistant messages merged into its first where one before
    its last holds a ``tool_use``: Anthropic reads such a run as one turn, whose calls the next
    user message answers. Lowered as they came, a call's result (or the note standing for a
    missing one) went between them, and the turn's last piece, with the calls the final results
    answer, lost its leading thinking: a 400 with thinking on. The client's index of each
    message out, and the repairs."""

    def merge(i: int, end: int) -> bool:
        return end - i > 1 and any(_calls(m) for m in messages[i : end - 1])

    return _merged_runs(messages, _assistant, merge, "split_turn", "assistant")


def _merged_runs(
    messages: list[Any],
    member: Callable[[Any], bool],
    merge: Callable[[int, int], bool],
    kind: str,
    role: str,
) -> Merged:
    """Each run of ``member`` messages (``messages[i:end]``) that ``merge`` says to merge, as
    one message: the first's, holding all their blocks."""
    out: list[Any] = []
    origin: list[int] = []
    repairs: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        end = i + 1
        while member(messages[i]) and end < len(messages) and member(messages[end]):
            end += 1
        if merge(i, end):
            blocks = [b for m in messages[i:end] for b in as_list(m.get("content"))]
            out.append({**messages[i], "content": blocks})
            origin.append(i)
            repairs.append(repair(kind, i, f"merged_{end - i}_{role}_messages"))
        else:
            out.extend(messages[i:end])
            origin.extend(range(i, end))
        i = end
    return out, origin, repairs


def _assistant(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") == "assistant"


def _calls(m: Any) -> bool:
    content = m.get("content")
    return isinstance(content, list) and any(block_kind(b) == "tool_use" for b in content)


def block_kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None
