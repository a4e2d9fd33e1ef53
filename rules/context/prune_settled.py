"""prune's start on messages it has seen: the request's view, without building the request's
``Run`` (the anchors' index, the stored overlay loaded, the observations by result, the
first-seen cap, the replay) when the very same messages came with the very same stored overlay
and options on an earlier request whose ``Run`` capped nothing and left the overlay as stored
(``Context.recall``): a resent body, or a tool loop's request prune has read and not changed.

What a ``Run`` makes of the messages there is a function of them, the stored overlay and the
options alone (token counts included: the session's memos are kept per token encoding), so the
kept view is the one it would render. A request that looks for a compaction builds its ``Run``
all the same (``run_of``)."""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass

from rules.base import Context, Message
from rules.context import overlay
from rules.context.prune_plan import Options, Run
from rules.report import Pruning

SETTLED_MEMO = "prune_settled"  # ``Context.recall`` name: a list, a stored overlay, options


@dataclass(frozen=True)
class Settled:
    """What a request's ``Run`` rendered of its messages, and the figures prune reports of it."""

    view: tuple[Message, ...] | None  # None: the messages themselves (nothing edited)
    anchors: list[str]  # the view's anchors as ``Run.share_anchors`` told them (a view's)
    compactions: int
    edits: Sized  # the overlay's, as loaded
    dropped: Sized


class Kept:
    """Stands in for the ``Run`` at the end of a request whose view ``Settled`` gave: nothing
    decided, the overlay as stored, the anchors told already."""

    def __init__(self, settled: Settled) -> None:
        self.decisions: list[Pruning] = []
        self.stages: dict[str, int] = {}
        self.overlay = settled  # its figures: compactions, edits, dropped

    def share_anchors(self, view: list[Message]) -> list[str] | None:
        return None


def run_of(ctx: Context, cfg: Options, namespace: str) -> tuple[Run, list[Message]]:
    """The request's ``Run``, its first-seen cap made, and its view."""
    run = Run(ctx, cfg, namespace)
    run.cap_new_results()
    return run, run.render(run.overlay)


def begin(ctx: Context, cfg: Options, namespace: str) -> tuple[Run | Kept, list[Message]]:
    """(the request's ``Run``, its view), or (its stand-in, the view kept for these messages, the
    stored overlay and ``cfg``: a list of its own, told its anchors as ``Run.share_anchors``
    did)."""
    found, settled = ctx.recall(SETTLED_MEMO, (ctx.state.get(namespace), cfg))
    if not found:
        return run_of(ctx, cfg, namespace)
    if settled.view is None:
        return Kept(settled), ctx.messages
    view = list(settled.view)
    ctx.share(overlay.MEMO, view, settled.anchors)
    return Kept(settled), view


def settle(
    ctx: Context, namespace: str, run: Run, view: list[Message] | None, told: list[str] | None
) -> None:
    """Keep what ``run`` rendered (``view``, None: the messages themselves; its anchors
    ``told``) for a later request with the same messages, stored overlay and options, when it
    capped nothing and left the overlay as stored (then the view is the one a ``Run`` renders)."""
    stored = ctx.state.get(namespace)
    if run.decisions or run.overlay_changed(stored):
        return
    if view is not None and told is None:
        return  # not the run's last rendering (a compaction tried): its anchors were not told
    ov = run.overlay
    edits, dropped = tuple(ov.edits), tuple(ov.dropped)  # what is reported: their numbers
    kept = Settled(
        None if view is None else tuple(view), told or [], ov.compactions, edits, dropped
    )
    ctx.keep(SETTLED_MEMO, (stored, run.cfg), kept)
