"""What a whole block of inject's would say on a request (``sections``), and whether the history
is hidden from the model there (``history_hidden``): a compaction removed what the working set
sums up, or the prompt is billed whole anyway on a cold cache."""

from __future__ import annotations

from functools import partial
from typing import Protocol

from rules.base import Context, Messages
from rules.context import seen, working_set
from rules.context.inject_text import Sections, recent_lines, reference_lines
from rules.entities import cache as entity_cache
from rules.report import Reference
from rules.workspace import render as workspace_render
from rules.workspace import workspace_map


class Options(Protocol):
    """What of inject's options (``inject.Config``) a block's sections read."""

    @property
    def recent_context(self) -> str: ...
    @property
    def max_entities(self) -> int: ...
    @property
    def ttl_seconds(self) -> float: ...
    @property
    def working_set_min_messages(self) -> int: ...
    @property
    def working_set_when(self) -> str: ...
    @property
    def say_visible(self) -> bool: ...


def history_hidden(ctx: Context) -> str | None:
    """Why a working set is worth saying (``compacted``: the model can no longer see what it
    sums up; ``cold``: the prompt is billed whole anyway), or None: the history is intact and
    read from a warm cache, or nothing is known of the cache (a first request: assumed cached,
    as prune does, and its history is intact)."""
    pruned = ctx.report.get("prune") or {}
    if pruned.get("compacted"):
        return "compacted"
    cache = (pruned.get("schedule") or {}).get("cache")
    if cache is None:  # no budget, or no prune: the upstream's last answer alone
        last = ctx.cache.last_at
        cache = "cold" if last is not None and ctx.now - last > ctx.cache.ttl_s else None
    return "cold" if cache == "cold" else None


def sections(ctx: Context, cfg: Options, messages: Messages, shown: Sections) -> Sections:
    """What a whole block would say for this request. While the model can see the history, the
    working set stays as the blocks last said it (``shown``): nothing about it is new to say."""
    refs: list[Reference] = list(ctx.report.get("references") or [])
    hidden = cfg.working_set_when == "always" or history_hidden(ctx) is not None
    ambiguous = any(r.get("abstained") == "ambiguous" for r in refs)
    referred = ambiguous or any(r.get("entity") for r in refs)
    show_recent = (cfg.recent_context == "always" and hidden) or (
        cfg.recent_context == "on_reference" and referred
    )
    recent: list[str] = []
    if show_recent:
        stored = ctx.state.get(entity_cache.NAMESPACE) or []
        events = entity_cache.fresh(stored, ctx.now, cfg.ttl_seconds)
        # lines whose call the model still reads are left out (not for an ambiguous reference)
        look = events and not (cfg.say_visible or ambiguous)
        in_view = seen.calls_in_view(ctx, messages) if look else set()
        recent = recent_lines(events, cfg.max_entities, in_view)
    # the workspace picture a proxy read at the session's start: new to the model, said once,
    # from the session's second request (the first user message is never altered)
    wsmap = ctx.state.get(workspace_map.NAMESPACE) or {}
    boot = workspace_render.boot_items(wsmap) if _answered(messages) else []
    if not hidden:
        ws = shown.ws + [i for i in boot if i not in shown.ws] if boot else shown.ws
    elif len(messages) >= cfg.working_set_min_messages:
        ws = working_set.section_items(ctx.state, partial(working_set.diagnostics_of, ctx))
        ws = boot + ws + workspace_render.section_items(wsmap)
    else:
        ws = boot
    return Sections(recent, reference_lines(refs), ws)


def _answered(messages: Messages) -> bool:
    """Whether the model has answered in this conversation: not its first request."""
    return any(m.get("role") == "assistant" for m in messages)
