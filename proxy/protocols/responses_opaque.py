"""The Responses calls a client runs that the chat view cannot show (``shell_call``,
``apply_patch_call``: the shell and patch tools; a ``tool_search_call`` the client executes, as
Codex does), paired as the chain repair pairs functions.
Responses refuses a call without its output and an output without its call, and a client that
was interrupted between the two (a run cancelled, an approval never given) resends that history
on every retry. A call left unanswered gets an output saying so, after its turn; an output whose
call is gone becomes the user's text. A ``computer_call``'s output needs a screenshot: none is
written, the body goes as sent. (A ``local_shell_call`` is a call the chat view shows:
``responses_parts.CALLS``.)"""

from __future__ import annotations

from typing import Any

from proxy.protocols.responses_parts import References, kind
from rules.chain.text import SYNTHETIC_RESULT
from rules.messages import PLACEHOLDER_PREFIX

OUTPUT_OF = {
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
}
CALL_OF = {v: k for k, v in OUTPUT_OF.items()}
_CLIENT_RUN = "tool_search"  # its items' ``execution`` says who ran it: paired when the client did


def _turn_item(k: str) -> bool:
    """Whether an item of kind ``k`` is of the model's turn (a call's output goes after the last
    of them)."""
    return k == "reasoning" or k == "program" or k.endswith("_call")


def pair_opaque_calls(
    items: list[Any], start: int, held: bool
) -> tuple[list[Any], list[dict[str, Any]]]:
    """``items`` with every such call (``OUTPUT_OF``) answered and every such output called (a new
    list, or ``items`` itself when nothing was needed), and the repairs made. ``start``: the
    items before it are a request's that needed nothing; ``held``: the request continues the
    provider's history, where an output's call may be there."""
    found = _scan(items, start)
    if found is None:
        return items, []
    if start and found[1]:  # an output whose call may come before ``start``
        found = _scan(items, 0)
        if found is None:
            return items, []
    calls, outputs = found
    references = References(items)  # walked once, when first asked
    orphans = {i for i in outputs if not (held or references.before(i))}
    if not calls and not orphans:
        return items, []
    after: dict[int, list[Any]] = {}
    repairs: list[dict[str, Any]] = []
    ends = _turn_ends(items, {i for i, _ in calls})
    for i, cid in calls:
        after.setdefault(ends[i], []).append(_interrupted(kind(items[i]), cid))
        repairs.append({"kind": "unanswered_call", "index": i, "tool_call_id": cid,
                        "action": "synthesized_result"})  # fmt: skip
    out: list[Any] = []
    for i, item in enumerate(items):
        if i in orphans:
            out.append(_as_user_text(item))
            cid = item.get("call_id")
            repairs.append({"kind": "orphan_result", "index": i, "tool_call_id": cid,
                            "action": "kept_as_user_text"})  # fmt: skip
        else:
            out.append(item)
        out.extend(after.get(i, ()))
    return out, repairs


def _scan(items: list[Any], start: int) -> tuple[list[tuple[int, str]], list[int]] | None:
    """(the unanswered calls, the outputs with no call before them) among ``items[start:]``;
    None when there is neither."""
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    lone: list[int] = []
    for i in range(start, len(items)):
        item = items[i]
        if not isinstance(item, dict):
            continue
        k = item.get("type")
        if k in OUTPUT_OF or k in CALL_OF:
            cid = item.get("call_id")
            if not isinstance(cid, str):
                continue
            if k.startswith(_CLIENT_RUN) and item.get("execution") != "client":
                continue  # the server's search: its output is the server's too
            if k in OUTPUT_OF:
                open_calls.setdefault(cid, i)
            elif cid in open_calls:
                answered.add(cid)
            else:
                lone.append(i)
    calls = [(i, cid) for cid, i in open_calls.items() if cid not in answered]
    return (calls, lone) if calls or lone else None


def _turn_ends(items: list[Any], at: set[int]) -> dict[int, int]:
    """For each index in ``at``: the last item of the model's turn holding it that is no
    reasoning, in one walk back (a turn of thousands of calls is walked once, not once a call).
    A reasoning item leads to the item after it: an output put after the turn's last reasoning
    would part it from the message it led to."""
    ends: dict[int, int] = {}
    end: int | None = None  # the current turn's last item that is no reasoning
    for i in range(len(items) - 1, min(at, default=len(items)) - 1, -1):
        k = kind(items[i])
        if not _turn_item(k):
            end = None
            continue
        if end is None and k != "reasoning":
            end = i
        if i in at and end is not None:
            ends[i] = end
    return ends


def _interrupted(call_kind: str, cid: str) -> dict[str, Any]:
    if call_kind == "tool_search_call":  # the search found nothing: no tool is loaded
        return {"type": "tool_search_output", "call_id": cid, "execution": "client",
                "status": "completed", "tools": []}  # fmt: skip
    if call_kind == "shell_call":
        outcome = {"type": "exit", "exit_code": 1}
        chunk = {"stdout": "", "stderr": SYNTHETIC_RESULT, "outcome": outcome}
        return {"type": "shell_call_output", "call_id": cid, "output": [chunk]}
    return {"type": "apply_patch_call_output", "call_id": cid, "status": "failed",
            "output": SYNTHETIC_RESULT}  # fmt: skip


def _as_user_text(item: dict[str, Any]) -> dict[str, Any]:
    """An output whose call is gone, as the user's message saying so, with what it held."""
    cid = item.get("call_id")
    head = f"{PLACEHOLDER_PREFIX} {kind(item)} for call {cid} had no matching call]"
    text = "\n".join([head, *_output_texts(item)])
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _output_texts(item: dict[str, Any]) -> list[str]:
    output = item.get("output")
    if isinstance(output, str):
        return [output]
    tools = item.get("tools")
    names = [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    texts = [f"tools found: {', '.join(n for n in names if isinstance(n, str))}"] if names else []
    for chunk in output if isinstance(output, list) else []:
        for stream in ("stdout", "stderr") if isinstance(chunk, dict) else ():
            text = chunk.get(stream)
            if isinstance(text, str) and text:
                texts.append(text)
    return texts
