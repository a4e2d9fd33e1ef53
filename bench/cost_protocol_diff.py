"""Why a protocol's ``bench.cost`` figures differ from the chat replay's: each conversation replayed
as chat and as the protocol (``direct`` and ``defaults``, on the prefix cache, the ``every-turn``
clock), request by request, then the difference split in two.

- **Decisions.** The conversations where prune compacted on other requests (the schedule decided
  otherwise on the protocol's chat view), and what they move of the aggregate: the protocol's
  aggregate with those conversations at the chat replay's ratio.
- **The wire.** On the conversations where every compaction fell on the same requests, the input
  tokens the rewrite saved on the wire (direct's prompt − defaults', request by request) per
  token it freed in the rules' view (the report's ``tokens.before − tokens.after``). Eliding
  the same messages saves what they weigh on the wire: a tool call's arguments are a JSON string
  inside the JSON in Chat Completions (every quote and newline escaped twice), an object in
  Gemini's ``args``, so the same elision saves fewer tokens there, and the ratio ends nearer 1.
- **What the wire weighs** (``call_weight``): every tool call's arguments in the corpus, in
  tokens in the rules' view (the adapter's lowering of the converted body), on the chat wire and
  on the protocol's; and the whole direct prompts, on each wire per view token. A gap the wire
  explains is the protocol's own bytes, which no rewrite changes.

    .venv/bin/python -m bench.cost_protocol_diff --protocol gemini [--max-requests 40] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch on import

from bench.cache_emulator import CacheUse, Pricing
from bench.cost import spread
from bench.cost_config import PRICES, PROTOCOLS, Job, parse_variant
from bench.cost_lanes import Lane
from bench.cost_rewrite import _ADAPTERS, chat_view, convert
from bench.replay import Replay
from proxy.tokens import TiktokenCounter
from rules.messages import tool_calls
from tests.support.traces import iter_conversations

METHODS = (parse_variant("direct"), parse_variant("defaults"))


@dataclass
class Trace:
    """One replay's figures for ``defaults`` (and ``direct``'s cost), per price variant."""

    compacted: dict[str, list[int]] = field(default_factory=dict)  # price -> request indices
    cost: dict[str, tuple[float, float]] = field(
        default_factory=dict
    )  # price -> (defaults, direct)
    # the direct lane's prompts: input tokens on the wire, tokens in the rules' view
    direct_wire: int = 0
    direct_view: int = 0
    # price -> what the compactions saved: each compacting request's saving less the previous
    # request's, in input tokens on the wire and in the rules' view
    wire_saved: dict[str, int] = field(default_factory=dict)
    view_saved: dict[str, int] = field(default_factory=dict)


class _Recording(Replay):
    """``Replay`` noting, for each request, what ``_account`` sees of the two methods."""

    def __init__(self, job: Job) -> None:
        super().__init__(job)
        self.trace = Trace()
        self.k = -1
        self.direct_prompt = 0
        # price -> the previous request's saving: on the wire, in the view
        self.saved: dict[str, tuple[int, int]] = {}

    def step(self, prefix: Any, now: float, last: bool) -> None:
        self.k += 1
        super().step(prefix, now, last)

    def _account(
        self, lane: Lane, prefix: Any, view: Any, out: Any, report: Any, *rest: Any
    ) -> None:  # type: ignore[override]
        prompt = lane.stats.prompt
        super()._account(lane, prefix, view, out, report, *rest)
        sent = lane.stats.prompt - prompt
        if lane.method.kind == "direct":
            self.direct_prompt = sent
            self.trace.direct_wire += sent
            return
        assert lane.pricing is not None
        price = lane.pricing.name
        if (report.get("prune") or {}).get("compacted"):
            self.trace.compacted.setdefault(price, []).append(self.k)
        tokens = report.get("tokens") or {}
        if lane is self.lanes[-1]:  # once a request: the view direct sent
            self.trace.direct_view += tokens.get("before") or 0
        wire = self.direct_prompt - sent  # the lanes run direct first, then defaults
        view = (tokens.get("before") or 0) - (tokens.get("after") or 0)
        if (report.get("prune") or {}).get("compacted"):  # what this compaction added
            was = self.saved.get(price, (0, 0))
            t = self.trace
            t.wire_saved[price] = t.wire_saved.get(price, 0) + wire - was[0]
            t.view_saved[price] = t.view_saved.get(price, 0) + view - was[1]
        self.saved[price] = (wire, view)


def _cost(lane: Lane, pricing: Pricing) -> float:
    s = lane.stats
    return pricing.cost(CacheUse(s.prompt, s.cached, s.written))


def replay_pair(
    args: tuple[dict[str, Any], str, int, tuple[Pricing, ...]],
) -> tuple[str, dict[str, Trace]]:
    conv, protocol, max_requests, pricings = args
    out: dict[str, Trace] = {}
    for name in ("chat", protocol):
        job = Job(conv, METHODS, pricings, 0, False, name, "every-turn", 60.0, max_requests)
        replay = _Recording(job)
        replay.run()
        direct = next(lane for lane in replay.lanes if lane.method.kind == "direct")
        for lane in replay.lanes:
            if lane.pricing is not None:
                replay.trace.cost[lane.pricing.name] = (
                    _cost(lane, lane.pricing),
                    _cost(direct, lane.pricing),
                )
        out[name] = replay.trace
    return conv["id"], out


def _call_arguments(node: Any) -> Iterator[Any]:
    """Every tool call's arguments in a body, as the wire holds them: a JSON string in Chat
    Completions' ``function.arguments`` and a Responses ``function_call``, an object in Gemini's
    ``functionCall.args`` and an Anthropic ``tool_use`` block's ``input``."""
    if isinstance(node, list):
        for item in node:
            yield from _call_arguments(item)
        return
    if not isinstance(node, dict):
        return
    fn = node.get("function")
    if isinstance(node.get("functionCall"), dict):
        yield node["functionCall"].get("args")
    elif node.get("type") == "tool_use":
        yield node.get("input")
    elif node.get("type") == "function_call":
        yield node.get("arguments")
    elif isinstance(fn, dict) and "arguments" in fn:
        yield fn["arguments"]
    else:
        for value in node.values():
            yield from _call_arguments(value)


def call_weight(conversations: list[dict[str, Any]], protocol: str) -> tuple[int, int, int]:
    """The corpus' tool-call arguments in tokens: in the rules' view of the protocol's body (its
    adapter's lowering), on the chat wire and on the protocol's (each value serialised as the
    prefix cache reads it: ``orjson``, keys sorted)."""
    count = TiktokenCounter("o200k_base").count_text

    def tokens(value: Any) -> int:
        return count(orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode())

    view = chat = wire = 0
    for conv in conversations:
        messages = conv["messages"]
        body = convert(protocol, "gemini-2.5-flash", messages)
        for m in chat_view(_ADAPTERS[protocol], body):
            view += sum(count(str(c["function"]["arguments"])) for c in tool_calls(m))
        chat += sum(tokens(a) for a in _call_arguments(messages))
        wire += sum(tokens(a) for a in _call_arguments(body))
    return view, chat, wire


def _replayed(work: list[Any], jobs: int) -> Iterator[tuple[str, dict[str, Trace]]]:
    if jobs <= 1:
        yield from map(replay_pair, work)
        return
    import multiprocessing as mp

    with mp.get_context("fork").Pool(jobs) as pool:
        yield from pool.imap_unordered(replay_pair, work, chunksize=1)


def report(
    results: dict[str, dict[str, Trace]],
    protocol: str,
    pricings: tuple[Pricing, ...],
    weight: tuple[int, int, int],
) -> None:
    print(f"chat vs {protocol}: {len(results)} conversations, defaults on the prefix cache\n")
    print("| price | chat | " + protocol + " | conversations compacting on other requests | "
          f"{protocol} with those at chat's ratio |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    for p in pricings:
        sums = {name: [0.0, 0.0, 0.0, 0.0] for name in ("chat", protocol)}
        differ = 0
        for traces in results.values():
            same = traces["chat"].compacted.get(p.name, []) == traces[protocol].compacted.get(
                p.name, []
            )
            differ += not same
            for name in sums:
                method, direct = traces[name].cost[p.name]
                at = 0 if same else 2
                sums[name][at] += method
                sums[name][at + 1] += direct
        c, g = sums["chat"], sums[protocol]
        chat_ratio = (c[0] + c[2]) / (c[1] + c[3])
        ratio = (g[0] + g[2]) / (g[1] + g[3])
        at_chat = (g[0] + (c[2] / c[3] if c[3] else 0) * g[3]) / (g[1] + g[3])
        print(f"| {p.name} | {chat_ratio:.4f} | {ratio:.4f} | {differ} | {at_chat:.4f} |")
    print("\nConversations compacting on the same requests: what their compactions saved, input "
          "tokens on the wire per token in the rules' view\n")  # fmt: skip
    print(f"| price | conversations | chat | {protocol} |")
    print("|---|---:|---:|---:|")
    for p in pricings:
        alike = [
            t
            for t in results.values()
            if t["chat"].compacted.get(p.name, []) == t[protocol].compacted.get(p.name, [])
        ]
        cells = []
        for name in ("chat", protocol):
            wire = sum(t[name].wire_saved.get(p.name, 0) for t in alike)
            view = sum(t[name].view_saved.get(p.name, 0) for t in alike)
            cells.append(f"{wire:,} / {view:,} = {wire / view:.3f}" if view else "—")
        print(f"| {p.name} | {len(alike)} | {cells[0]} | {cells[1]} |")
    print("\nWhat the wire weighs: input tokens on each wire per token in the rules' view\n")
    print(f"| what | view tokens | chat | {protocol} |")
    print("|---|---:|---:|---:|")
    view, chat, wire = weight
    per = (f"{chat / view:.3f} | {wire / view:.3f}") if view else "— | —"
    print(f"| the corpus' tool-call arguments | {view:,} | {per} |")
    prompts: list[tuple[int, str]] = []
    for name in ("chat", protocol):
        sent = sum(t[name].direct_wire for t in results.values())
        seen = sum(t[name].direct_view for t in results.values())
        prompts.append((seen, f"{sent / seen:.3f}" if seen else "—"))
    print(f"| direct's prompts (the replay's requests) | {prompts[0][0]:,} · {prompts[1][0]:,} "
          f"| {prompts[0][1]} | {prompts[1][1]} |")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--protocol", choices=[p for p in PROTOCOLS if p != "chat"], default="gemini"
    )
    parser.add_argument("--max-requests", type=int, default=40)
    parser.add_argument("--limit", type=int, default=0, help="N conversations spread (0: all)")
    parser.add_argument("--prices", default="0.1,0.25,0.5,0.1w")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    pricings = tuple(PRICES[k.strip()] for k in args.prices.split(","))
    corpus = spread(list(iter_conversations()), args.limit)
    work = [(c, args.protocol, args.max_requests, pricings) for c in corpus]
    results = dict(_replayed(work, args.jobs))
    report(results, args.protocol, pricings, call_weight(corpus, args.protocol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
