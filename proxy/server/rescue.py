"""Upstream overflow rescue: when the upstream answers that the prompt is too long, learn the
window it states, for the principal's requests (as stated, never below its floor:
``Engine.learn_window``), rewrite the request again under that lower budget, scaled into the
proxy's count for this request only (prune compacts, down to dropping whole turns but never the
protected floor) and retry once. The client sees the upstream's error only when even the
compacted request cannot fit, or the retry fails again.

Overflow answers come with a status before any streamed byte, so streaming requests are rescued
alike. A failure inside the rescue itself leaves the upstream's answer standing: never a 5xx of
ours. The row records the rescue (``report["rescue"]``), /metrics counts it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from proxy.errors import ProxyError
from proxy.failures import STOPPING
from proxy.rewrite.engine import Rewritten
from proxy.server.body_work import captured_json
from proxy.server.forward_first import put_back
from proxy.server.stream_deadline import answer_bound
from proxy.upstream import UpstreamResponse
from proxy.upstream.overflow import Overflow, overflow_of
from rules.report import Report, RescueSummary, bounded_report

if TYPE_CHECKING:
    from proxy.server.services import Services
    from proxy.server.wire import Call, Wire

log = logging.getLogger("ctxproxy.rescue")
# Our count fell short of the upstream's and it named no prompt size: aim this far under it.
SHORTFALL_MARGIN = 0.9


def prompt_tokens(report: Report) -> int:
    """The forwarded prompt in our count: messages and the tools schema."""
    tokens = report.get("tokens")
    messages = tokens["after"] if tokens else 0
    return messages + (report.get("prune") or {}).get("tools_tokens", 0)


async def rescue_overflow(
    s: Services,
    wire: Wire,
    call: Call,
    rewritten: Rewritten,
    response: UpstreamResponse,
    row: dict[str, Any],
    raw_size: int = 0,
    client: dict[str, Any] | None = None,
) -> tuple[UpstreamResponse, Rewritten]:
    """The answer to relay and the rewrite it answers: the retry's when there was one, else the
    upstream's own. Errors of the retry call itself (a timeout …) propagate as the first call's
    would, with the rescue recorded. ``client``: the client's body, which the retry rewrites
    (else the forwarded one)."""
    if response.chunks is not None:
        return response, rewritten
    overflow = overflow_of(response.status, response.body)
    if overflow is None:
        return response, rewritten
    try:
        second, info = await _compacted(
            s, wire, rewritten, overflow, call.headers, row, raw_size, client
        )
    except STOPPING:
        raise
    except BaseException:  # a bug of ours (or a native panic) must not turn a 400 into our 500
        log.exception("request %s: the overflow rescue failed", row["id"])
        return response, rewritten
    if second is None:
        await _record(s, row, rewritten, info)
        return response, rewritten
    info["retried"] = True
    try:  # the retry's answer waits within the same bound as the first's
        async with answer_bound(s.settings.limits.stream_max_s):
            retry = await wire.forward(call, call.sent(second.body), None)
    except ProxyError as exc:
        info["outcome"], info["status"] = "failed_again", exc.status
        await _record(s, row, second, info)
        await put_back(s.engine, row["id"], rewritten, second)  # as the first found it
        raise
    fitted = retry.status < 400
    info["outcome"], info["status"] = ("fitted" if fitted else "failed_again"), retry.status
    log.info(
        "request %s: prompt over %s's window, compacted %d -> %d tokens and retried: %d",
        row["id"],
        call.upstream.name,
        info.get("tokens_before", 0),
        info.get("tokens_after", 0),
        retry.status,
    )
    await _record(s, row, second, info)
    return retry, second


async def _compacted(
    s: Services,
    wire: Wire,
    rewritten: Rewritten,
    overflow: Overflow,
    headers: Mapping[str, str],
    row: dict[str, Any],
    raw_size: int,
    client: dict[str, Any] | None,
) -> tuple[Rewritten | None, RescueSummary]:
    """The request rewritten to fit the stated window, or None (and why) when it cannot be.
    The rewrite is of the client's body, on the state the refused attempt ran on (that attempt
    put back first): the rules run once on what the client sent, never again on their own
    output (its dropped-turns lines read as user turns, its notes as results), and the
    retry's state is what the client's request under that budget leaves. A rewrite not sent
    is put back too."""
    before = prompt_tokens(rewritten.report)
    info: RescueSummary = {
        "window": overflow.window,
        "tokens_before": before,
        "retried": False,
        "outcome": "no_window",
    }
    if overflow.window is None:
        return None, info
    body = rewritten.body
    model = rewritten.model if rewritten.model is not None else body["model"]
    engine = s.engine
    # what the principal's later requests of the model are held to: the window as stated, at
    # least the floor (another principal's are not: the answer may quote this one's text)
    learned = engine.learn_window(model, overflow.window, rewritten.principal)
    # The upstream's count can run higher than ours (media, another tokenizer): this request's
    # retry is scaled into our count. Only this one's: a ratio of one request says nothing of
    # another's, and an image-heavy one would shrink every client's window.
    scale = 1.0
    if overflow.prompt_tokens and before and overflow.prompt_tokens > before:
        scale = before / overflow.prompt_tokens
    budget = engine.budget_under(model, overflow.window, scale, rewritten.principal)
    if overflow.completion_tokens and overflow.completion_tokens < overflow.window:
        budget = min(budget, int((overflow.window - overflow.completion_tokens) * scale))
    if budget >= before:  # by our count it fitted already: our count falls short
        budget = int(before * SHORTFALL_MARGIN)
    info["learned"], info["budget"] = learned, budget
    await engine.take_back(rewritten)  # refused: the retry runs on what it ran on
    try:
        second = await engine.rewrite(
            body if client is None else client,
            headers,
            now=row["created_at"],
            session_id=rewritten.client_session,
            parent_session_id=rewritten.client_parent,
            raw_size=raw_size,  # a huge body is rewritten off the event loop again
            budget=budget,
            adapter=wire.adapter,
            principal=rewritten.principal,
            model=rewritten.model,
        )
    except ProxyError:  # e.g. pipeline.on_over_budget: reject
        info["outcome"] = "floor_too_big"
        return None, info
    after = info["tokens_after"] = prompt_tokens(second.report)
    if after > budget or after >= before:
        info["outcome"] = "floor_too_big" if after > budget else "no_gain"
        # never sent: the state it saved and its ledger note are taken back
        await put_back(engine, row["id"], second)
        return None, info
    return second, info


async def _record(
    s: Services, row: dict[str, Any], rewritten: Rewritten, info: RescueSummary
) -> None:
    """The rescue on the log row: the report of what was forwarded last, with ``rescue``."""
    report: Report = {**rewritten.report, "rescue": info}
    fields: dict[str, Any] = {
        "report": bounded_report(report),
        "tokens_after": report["tokens"]["after"],
        "sections": report.get("sections"),
    }
    if s.settings.store.capture_payloads:  # in a worker: redaction can take long (body_work)
        fields["forwarded_body"] = await s.engine.offload.run(captured_json, rewritten.body)
    row.update(fields)
    await s.store.finish_request(row["id"], fields)
