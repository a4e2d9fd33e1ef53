"""Runs of messages Anthropic reads as one, for ``anthropic_mend``: a user's messages after a
model's turn holding its results (merged into the first), and an assistant's messages of one
turn (merged where one before the last holds a call). Each merge is reported as a repair."""

from __future__ import annotations

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


def merged_result_runs(
    messages: list[Any],
) -> tuple[list[Any], list[int], list[dict[str, Any]]]:
    """``messages`` with each run of user messages after a model's turn merged into its first
    where a later one of the run holds a ``tool_result`` (the results may answer that turn's
    calls; any other is an orphan the chain repair makes text, and the task's first message is
    never merged into); the client's index of each message out, and the repairs."""
    out: list[Any] = []
    origin: list[int] = []
    repairs: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        end = i + 1
        while is_user(messages[i]) and end < len(messages) and is_user(messages[end]):
            end += 1
        after_model = (
            i > 0
            and isinstance(messages[i - 1], dict)
            and (messages[i - 1].get("role") == "assistant")
        )
        if after_model and any(holds_result(m) for m in messages[i + 1 : end]):
            blocks = [b for m in messages[i:end] for b in as_list(m.get("content"))]
            out.append({**messages[i], "content": blocks})
            origin.append(i)
            repairs.append(repair("results_split", i, f"merged_{end - i}_user_messages"))
        else:
            out.extend(messages[i:end])
            origin.extend(range(i, end))
        i = end
    return out, origin, repairs


def merged_call_turns(
    messages: list[Any],
) -> tuple[list[Any], list[int], list[dict[str, Any]]]:
    """``messages`` with each run of assistant messages merged into its first where one before
    its last holds a ``tool_use``: Anthropic reads such a run as one turn, whose calls the next
    user message answers. Lowered as they came, a call's result (or the note standing for a
    missing one) went between them, and the turn's last piece, with the calls the final results
    answer, lost its leading thinking: a 400 with thinking on. The client's index of each
    message out, and the repairs."""
    out: list[Any] = []
    origin: list[int] = []
    repairs: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        end = i + 1
        while end < len(messages) and _assistant(messages[i]) and _assistant(messages[end]):
            end += 1
        if end - i > 1 and any(_calls(m) for m in messages[i : end - 1]):
            blocks = [b for m in messages[i:end] for b in as_list(m.get("content"))]
            out.append({**messages[i], "content": blocks})
            origin.append(i)
            repairs.append(repair("split_turn", i, f"merged_{end - i}_assistant_messages"))
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
