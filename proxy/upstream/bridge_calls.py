"""A Responses input's shell, local shell and patch calls as the litellm bridge can carry them.

litellm's Responses-to-chat conversion knows function and custom tool calls and their outputs;
a ``local_shell_call`` (``codex-mini``'s ``local_shell`` tool), a ``shell_call`` or an
``apply_patch_call``, and each one's output, it dropped without a word: the model on another
provider saw neither the command it ran nor what came of it. Here, for a bridge only, each goes
as a ``function_call`` of its tool's name (``local_shell``, ``shell``, ``apply_patch``) whose
arguments are its action (a patch's operation), and its output as that call's
``function_call_output`` (a shell's list of stdout/stderr/outcome as its JSON text). The
client's objects are never changed; an input without such items is the same object."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.protocols.responses_parts import output_call_id

# a call's type: its tool's name and the field holding what it does
_CALLS = {
    "local_shell_call": ("local_shell", "action"),
    "shell_call": ("shell", "action"),
    "apply_patch_call": ("apply_patch", "operation"),
}
_OUTPUTS = frozenset(f"{call}_output" for call in _CALLS)


def bridged_calls(items: Any) -> Any:
    """``items`` with each such call and output a function call and its output (above)."""
    if not isinstance(items, list) or not any(_kind(i) in _CALLS or _kind(i) in _OUTPUTS
                                              for i in items):  # fmt: skip
        return items
    return [_call(i) if _kind(i) in _CALLS else _output(i) if _kind(i) in _OUTPUTS else i
            for i in items]  # fmt: skip


def _kind(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else None


def _call(item: dict[str, Any]) -> dict[str, Any]:
    name, field = _CALLS[item["type"]]
    what = item.get(field)
    call = {
        "type": "function_call",
        "call_id": item.get("call_id"),
        "name": name,
        "arguments": orjson.dumps(what if isinstance(what, dict) else {}).decode(),
    }
    if isinstance(item.get("id"), str):
        call["id"] = item["id"]
    return call


def _output(item: dict[str, Any]) -> dict[str, Any]:
    output = item.get("output")
    if not isinstance(output, str):  # a shell's chunks, or none
        output = "" if output is None else orjson.dumps(output).decode()
    return {"type": "function_call_output", "call_id": output_call_id(item), "output": output}
