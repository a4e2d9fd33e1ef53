"""Parallel tool calls of a chat stream, as litellm's Messages adapter writes them to an Anthropic
client: each call's own arguments in its own ``tool_use`` block.

Anthropic's blocks are sequential (one open at a time); a chat stream's calls are not: OpenAI
and the servers like it stream two parallel calls' argument fragments interleaved (index 0, 1,
0, 1 …). litellm's chunk splitter holds a later call until the live one ends only when both
start in one chunk: a call starting in a chunk of its own took over as the live one, and the
earlier call's later fragments went into its block (``{"path": {"path": "a.py"}"b.py"}``).

Its router is replaced by one that keeps the first call live and holds every other call, started
in any chunk, gathering its fragments by index until a chunk of another kind or the stream's end
writes it whole (litellm's own release). The live call's id said again on a later fragment (some
servers write it, and the name, on every one) no longer opens a block of its own. Installed
once, when litellm is first imported (``proxy.providers.load_litellm``); litellm is pinned by
the lock, and ``tests/proxy/upstream/test_bridged_parallel_calls.py`` fails if a release moves
what this replaces."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

_INSTALLED = "_ctxproxy_tool_calls"
_LIVE_ID = "_ctxproxy_live_call_id"  # the live call's id, on litellm's splitter


def _merged(held: Any, part: Any) -> Any:
    """A held call's part with a later fragment of it added (an id or name sent late kept)."""
    return replace(
        held,
        call_id=held.call_id or part.call_id,
        call_type=held.call_type or part.call_type,
        name=held.name or part.name,
        arguments=held.arguments + part.arguments,
    )


def route_tool_calls(splitter: Any, chunk: Any, attrs: Any) -> tuple[Any, ...]:
    """What of ``chunk`` goes to the client now: the live call's fragments (or, a chunk without
    calls, every held call whole, then the chunk); every other call's fragments are held."""
    choices = attrs(chunk, "choices")
    delta = getattr(choices[0], "delta", None) if len(choices) == 1 else None
    tool_calls = attrs(delta, "tool_calls") if delta is not None else ()
    if not tool_calls:
        return (*splitter._release_held_calls(), chunk) if choices else (chunk,)
    held = dict(splitter._held_calls)
    started = splitter._live_call_index
    live_index = started
    live_id = getattr(splitter, _LIVE_ID, None) if started is not None else None
    live = []
    restated = False
    for part in splitter._tool_call_parts(tool_calls):
        if part.index in held:
            template, kept = held[part.index]
            held[part.index] = (template, _merged(kept, part))
        elif live_index is None or part.index == live_index:
            if part.name and live_index is None:
                live_index = part.index
            if part.index == started and part.call_id and part.call_id == live_id:
                # its id and name said again on a later fragment (as some servers write every
                # fragment): not a new call, which would open a block of its own
                part = replace(part, call_id=None, call_type=None, name=None)
                restated = True
            elif part.call_id:
                live_id = part.call_id
            live.append(part)
        else:
            held[part.index] = (chunk, part)
    splitter._held_calls = MappingProxyType(held)
    splitter._live_call_index = live_index
    setattr(splitter, _LIVE_ID, live_id)
    if len(tool_calls) == 1 and len(live) == 1 and not restated:
        return (chunk,)  # as it came (its other fields kept)
    return tuple(
        splitter._with_tool_call(chunk, part, keep_role=position == 0)
        for position, part in enumerate(live)
    )


def install() -> None:
    from litellm.llms.anthropic.messages.adapters import streaming_iterator as module

    splitter: Any = module._CombinedChunkSplitter
    if getattr(splitter, _INSTALLED, False):
        return
    attrs = module._optional_attr_sequence

    def _route_tool_calls(self: Any, chunk: Any) -> tuple[Any, ...]:
        return route_tool_calls(self, chunk, attrs)

    splitter._route_tool_calls = _route_tool_calls
    setattr(splitter, _INSTALLED, True)
