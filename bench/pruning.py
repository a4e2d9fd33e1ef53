"""Pruning quality on the trace corpus: ctxproxy's prune against four baselines, side by side.

    .venv/bin/python -m bench.pruning [--limit N] [--shares 0.5,0.25] [--json out.json]

Every conversation is replayed turn by turn (each prefix an agent would have sent, see
``tests/support/traces.request_prefixes``), at budgets of 50% and 25% of the whole conversation's
tiktoken size. Each method gets the chain-repaired prefix and the budget and returns what it would
forward: ctxproxy runs the real pipeline (repair_tool_chain → working_set → prune, state carried
between requests); the baselines are (a) drop the oldest messages, (b) ``litellm.utils.
trim_messages``, (c) keep first and last ("middle-out"), (d) mask all but the last 10 observations,
and (d+) the same but keeping the results ctxproxy protects as evidence (equal evidence).

Columns: mean tokens forwarded per request; share of requests over the budget; share of requests
with a broken chain (the validator finds a violation the input did not have); evidence kept, as the
share of requests keeping it verbatim: the latest failure (failing test, build error or crash),
the first user message, and the latest write call of each changed file; mean ``prefix_reuse``
(share of a request's tokens repeating the previous forwarded request's prefix); time per request.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson

from proxy.rewrite.pipeline import Pipeline
from proxy.settings import ConfiguredRule
from proxy.tokens import TokenCounters
from rules.activity.observations import observations
from rules.base import Context, Message, SessionState
from rules.chain import repair_tool_chain
from rules.chain import validator as chain_validator
from rules.chain.repairs import repair_messages
from rules.context import evidence, prune, working_set
from rules.messages import PLACEHOLDER_PREFIX, call_id, role, tool_calls
from tests.support.traces import iter_conversations, request_prefixes

TOKENS = TokenCounters().for_model("gpt-4o")
Method = Callable[[list[Message], int], list[Message]]


class Ctxproxy:
    def __init__(self) -> None:
        self.pipeline = Pipeline(
            [
                ConfiguredRule(name="repair_tool_chain", config=repair_tool_chain.Config()),
                ConfiguredRule(name="working_set", config=working_set.Config()),
                ConfiguredRule(name="prune", config=prune.Config()),
            ],
            "fail",
        )
        self.state = SessionState()
        self.compactions = 0

    def __call__(self, messages: list[Message], budget: int) -> list[Message]:
        ctx = Context(messages=messages, original_messages=messages, model="gpt-4o",
                      tokens=TOKENS, now=0.0, state=self.state, budget=budget)  # fmt: skip
        out = self.pipeline.run(ctx)
        self.state = out.state
        self.compactions += bool(out.report.get("prune", {}).get("compacted"))
        return out.messages


def drop_oldest(messages: list[Message], budget: int) -> list[Message]:
    """(a) Drop the oldest non-system messages until the rest fits."""
    keep = list(messages)
    total = TOKENS.count_messages(keep)
    i = 0
    while total > budget and i < len(keep) - 1:
        if role(keep[i]) == "system":
            i += 1
            continue
        total -= TOKENS.count_message(keep.pop(i))
    return keep


def litellm_trim(messages: list[Message], budget: int) -> list[Message]:
    """(b) litellm.utils.trim_messages with the budget as max_tokens."""
    import litellm

    out = litellm.utils.trim_messages(messages, model="gpt-4o", max_tokens=budget)
    return out[0] if isinstance(out, tuple) else out


def middle_out(messages: list[Message], budget: int) -> list[Message]:
    """(c) Keep the system prompts and the first user message, then the newest that fit."""
    first_user = next((i for i, m in enumerate(messages) if role(m) == "user"), 0)
    head = [m for m in messages[: first_user + 1]]
    total = TOKENS.count_messages(head)
    tail: list[Message] = []
    for m in reversed(messages[first_user + 1 :]):
        size = TOKENS.count_message(m)
        if total + size > budget:
            break
        tail.append(m)
        total += size
    return head + tail[::-1]


def mask_last_10(messages: list[Message], budget: int) -> list[Message]:
    """(d) Mask every tool result but the last 10, whatever the budget."""
    tools = [i for i, m in enumerate(messages) if role(m) == "tool"]
    old = set(tools[:-10])
    return [
        {**m, "content": f"{PLACEHOLDER_PREFIX} observation omitted]"} if i in old else m
        for i, m in enumerate(messages)
    ]


def mask_last_10_keep_evidence(messages: list[Message], budget: int) -> list[Message]:
    """(d+) Like (d), but the results ctxproxy protects as evidence are kept: equal evidence."""
    tools = [i for i, m in enumerate(messages) if role(m) == "tool"]
    protected = evidence.find(messages, observations(messages)).protected
    old = set(tools[:-10]) - set(protected)
    return [
        {**m, "content": f"{PLACEHOLDER_PREFIX} observation omitted]"} if i in old else m
        for i, m in enumerate(messages)
    ]


def shared_prefix_tokens(prev: list[Message], cur: list[Message]) -> int:
    shared = 0
    for a, b in zip(prev, cur, strict=False):
        if a is not b and a != b:
            break
        shared += TOKENS.count_message(b)
    return shared


def evidence_items(messages: list[Message]) -> dict[str, Any]:
    obs = observations(messages)
    ev = evidence.find(messages, obs)
    failures = [i for i in (ev.latest_test_failure, ev.latest_build_error) if i is not None]
    crash = [i for i, why in ev.protected.items() if why == "latest error"]
    latest_failure = max(failures + crash) if failures or crash else None
    writes: dict[str, str] = {}
    for o in obs:
        if o.action.kind == "write":
            writes[o.action.target] = o.call_id
    return {
        "failure": messages[latest_failure] if latest_failure is not None else None,
        "first_user": messages[ev.first_user] if ev.first_user is not None else None,
        "write_calls": set(writes.values()),
    }


def kept(items: dict[str, Any], out: list[Message]) -> dict[str, float | None]:
    results = {m.get("tool_call_id"): m for m in out if role(m) == "tool"}
    calls = {call_id(c) for m in out for c in tool_calls(m)}
    failure = items["failure"]
    first = items["first_user"]
    writes = items["write_calls"]
    return {
        "failure": None if failure is None else float(
            results.get(failure.get("tool_call_id")) == failure),
        "first_user": None if first is None else float(any(m == first for m in out)),
        "files": None if not writes else len(writes & calls) / len(writes),
    }  # fmt: skip


def replay(conv: dict[str, Any], share: float, methods: dict[str, Any], stats: dict) -> None:
    full = conv["messages"]
    budget = max(256, int(TOKENS.count_messages(full) * share))
    previous: dict[str, list[Message]] = {}
    for prefix in request_prefixes(full):
        repaired, _ = repair_messages(prefix)
        if chain_validator.find_violations(repaired):
            continue  # the input itself is broken beyond repair: not a fair test
        items = evidence_items(repaired)
        for name, method in methods.items():
            source = prefix if name == "ctxproxy" else repaired
            started = time.perf_counter()
            out = method(source, budget)
            s = stats[(name, share)]
            s["ms"].append((time.perf_counter() - started) * 1000)
            size = TOKENS.count_messages(out)
            s["tokens"].append(size)
            s["over"].append(size > budget)
            s["broken"].append(bool(chain_validator.find_violations(out)))
            for key, value in kept(items, out).items():
                if value is not None:
                    s[key].append(value)
            if name in previous:
                s["reuse"].append(shared_prefix_tokens(previous[name], out) / max(size, 1))
            previous[name] = out


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N conversations only")
    parser.add_argument("--shares", default="0.5,0.25")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument(
        "--trim-every", type=int, default=10,
        help="run (b) on every Nth conversation only (trim_messages takes ~0.2 s a request)",
    )  # fmt: skip
    parser.add_argument(
        "--trim-max-messages", type=int, default=400,
        help="skip (b) on longer conversations (its time grows with the square of the length)",
    )  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    shares = [float(s) for s in args.shares.split(",")]
    stats: dict = defaultdict(lambda: defaultdict(list))
    compactions: dict[float, int] = defaultdict(int)
    started = time.perf_counter()
    conversations = list(iter_conversations())[: args.limit]
    for n, conv in enumerate(conversations):
        for share in shares:
            ours = Ctxproxy()
            methods = {"ctxproxy": ours, "(a) drop oldest": drop_oldest,
                       "(b) litellm trim_messages": litellm_trim, "(c) middle-out": middle_out,
                       "(d) mask all but last 10": mask_last_10,
                       "(d+) as (d), evidence kept": mask_last_10_keep_evidence}  # fmt: skip
            if n % args.trim_every or len(conv["messages"]) > args.trim_max_messages:
                del methods["(b) litellm trim_messages"]
            replay(conv, share, methods, stats)
            compactions[share] += ours.compactions
    requests = len(stats[("ctxproxy", shares[0])]["tokens"])
    print(f"{len(conversations)} conversations, {requests} requests per budget, "
          f"{time.perf_counter() - started:.0f} s\n")  # fmt: skip
    print("| budget | method | requests | tokens/request | over budget | broken chain "
          "| latest failure kept | first user kept | files changed kept | prefix_reuse "
          "| ms/request |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    table = []
    for (name, share), s in stats.items():
        row = {
            "budget": f"{share:.0%}", "method": name, "tokens": mean(s["tokens"]),
            "over": mean(s["over"]), "broken": mean(s["broken"]), "failure": mean(s["failure"]),
            "first_user": mean(s["first_user"]), "files": mean(s["files"]),
            "reuse": mean(s["reuse"]), "ms": mean(s["ms"]),
        }  # fmt: skip
        table.append(row)
        row["requests"] = len(s["tokens"])
        print(f"| {row['budget']} | {name} | {row['requests']:,} | {row['tokens']:,.0f} | "
              f"{row['over']:.1%} | {row['broken']:.1%} | {row['failure']:.1%} | "
              f"{row['first_user']:.1%} | "
              f"{row['files']:.1%} | {row['reuse']:.3f} | {row['ms']:.2f} |")  # fmt: skip
    for share in shares:
        print(f"\nctxproxy compactions at {share:.0%}: {compactions[share]} in {requests} requests")
    if args.json:
        with open(args.json, "wb") as f:
            compacted = {f"{k:.0%}": v for k, v in compactions.items()}
            f.write(orjson.dumps({"rows": table, "compactions": compacted}))


if __name__ == "__main__":
    main()
