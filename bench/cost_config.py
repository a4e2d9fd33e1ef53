"""``bench.cost``'s vocabulary: the constants, the price variants, the methods (variant names),
one conversation's job, the model and budget a conversation is replayed with, and the clock
(the cadences)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any, Literal

from bench.cache_emulator import Pricing
from proxy.rewrite.model_windows import context_window
from proxy.settings import Settings
from rules.base import Message
from rules.messages import PLACEHOLDER_PREFIX, role

DEFAULT_LIMIT = 40  # conversations (all: --limit 0)
TTL_S = 300.0
MIN_PREFIX_TOKENS = 1024
STEP_S = (2.0, 10.0)  # an agent step: uniform seconds
USER_GAP_MEDIAN_S, USER_GAP_SIGMA = 60.0, 1.7  # lognormal idle gap before a user turn (idle)
EVEN_INTERVAL_S = 60.0  # the even cadence's default spacing
FALLBACK_MODEL = "gpt-4o"
PRICES = {  # --prices keys
    "0.1": Pricing("r=0.1", 0.1),
    "0.25": Pricing("r=0.25", 0.25),
    "0.5": Pricing("r=0.5", 0.5),
    "0.1w": Pricing("r=0.1, writes 1.25×", 0.1, 1.25),
}
DEFAULT_PRICES = ("0.1", "0.25", "0.5", "0.1w")
PRICINGS = tuple(PRICES.values())
MASK_PLACEHOLDER = f"{PLACEHOLDER_PREFIX} observation omitted]"
CLEARED = "[Old tool result content cleared]"  # Claude Code's microcompact placeholder
ENVELOPE_SHARE = 0.3
CADENCES = ("every-turn", "idle", "even")
PROTOCOLS = ("chat", "anthropic", "responses", "gemini")
CACHES = ("prefix", "anthropic", "responses")  # responses: the prefix cache, as OpenAI's


@dataclass(frozen=True)
class Method:
    """One row: how a request is rewritten before it goes upstream."""

    name: str
    kind: str  # direct | ctxproxy | mask | microcompact
    budget: int | None = None  # ctxproxy: configured budget (None: the model's window only)
    rules_off: tuple[str, ...] = ()
    keep: int = 0  # mask / microcompact: the last results kept
    bet: bool = False  # ctxproxy: prune's ``bet_on_length`` on (a variant ending in ``+bet``)
    restore: bool = False  # ctxproxy: prune's ``restore_elided`` on (``+restore``)
    # ctxproxy: prune's ``warm_threshold`` and its floor (``+rand``, ``+randG``, ``+srand``)
    threshold: str = "break_even"
    floor: float = 0.0
    risk: float | None = None  # ctxproxy: prune's ``bet_budget_share`` (``+riskN``: N/100)
    # ctxproxy: prune's ``warm_risk_share`` (``+guardN``: N/100; ``+guardoff``: unset, break-even
    # alone; None: the default)
    guard: float | Literal["off"] | None = None


def parse_variant(name: str) -> Method:
    """``direct``, ``defaults``, ``budget32k`` (or ``budget=N``), ``mask10`` (``maskN``),
    ``microcompact`` (``microcompactN``); ctxproxy ones may end in ``-no-RULE[+RULE…]``, and
    before that in ``+bet`` (prune's ``bet_on_length`` on: ``defaults+bet``), ``+restore``
    (prune's ``restore_elided`` on: ``budget32k+restore``), ``+rand`` (prune's
    ``warm_threshold: randomised``; ``+randG``: with ``warm_threshold_floor`` G/100, as
    ``+rand50``) or ``+srand`` (``randomised_session``; ``+srandG`` likewise), ``+riskN``
    (prune's ``bet_budget_share`` N/100: bets paid from winnings, ``+risk`` with a share of 0),
    ``+guardN`` (prune's ``warm_risk_share`` N/100: every warm cut paid from the risk budget;
    ``+guardoff``: unset, break-even alone)."""
    base, _, off = name.partition("-no-")
    flags = set()
    flag_pattern = r"bet|restore|s?rand\d*|risk\d*|guard(?:\d*|off)"
    while "+" in base and re.fullmatch(flag_pattern, base.rpartition("+")[2]):
        base, _, flag = base.rpartition("+")
        flags.add(flag)
    drawn = {"threshold": "break_even", "floor": 0.0}
    if len([f for f in flags if "rand" in f]) > 1:  # one threshold a variant
        raise ValueError(f"variant {name!r}: more than one of +rand / +srand")
    for flag in flags:
        if (m := re.fullmatch(r"(s?)rand(\d*)", flag)) is not None:
            mode = "randomised_session" if m.group(1) else "randomised"
            drawn = {"threshold": mode, "floor": int(m.group(2) or 0) / 100}
    risk = [int(f.removeprefix("risk") or 0) / 100 for f in flags if f.startswith("risk")]
    kw: dict[str, Any] = dict(bet="bet" in flags, restore="restore" in flags, **drawn)
    if len(risk) > 1:
        raise ValueError(f"variant {name!r}: more than one +risk")
    kw["risk"] = risk[0] if risk else None
    guard = [guard_share(f.removeprefix("guard")) for f in flags if f.startswith("guard")]
    if len(guard) > 1:
        raise ValueError(f"variant {name!r}: more than one +guard")
    kw["guard"] = guard[0] if guard else None
    rules_off = tuple(r for r in off.split("+") if r)
    if base == "direct":
        return Method(name, "direct")
    if base == "defaults":
        return Method(name, "ctxproxy", None, rules_off, **kw)
    if base.startswith("budget"):
        raw = base.removeprefix("budget").lstrip("=").lower()
        number = int(float(raw.removesuffix("k")) * 1000) if raw.endswith("k") else int(raw)
        return Method(name, "ctxproxy", number, rules_off, **kw)
    if base.startswith("mask"):
        return Method(name, "mask", keep=int(base.removeprefix("mask") or 10))
    if base.startswith("microcompact"):
        return Method(name, "microcompact", keep=int(base.removeprefix("microcompact") or 5))
    raise ValueError(f"unknown variant {name!r}")


def guard_share(flag: str) -> float | Literal["off"]:
    """prune's ``warm_risk_share`` a ``+guard…`` flag names: ``off`` (unset), else N/100."""
    return "off" if flag == "off" else int(flag or 0) / 100


@dataclass(frozen=True)
class Job:
    """One conversation through every method. The defaults are the ``idle`` clock and the prefix
    cache, so a caller that names neither replays as before these options existed."""

    conv: dict[str, Any]
    methods: tuple[Method, ...]
    pricings: tuple[Pricing, ...]
    seed: int
    envelope: bool = False  # count tool-call envelopes (the 30% budget table)
    protocol: str = "chat"  # each request converted to it, rewritten through its adapter
    cadence: str = "idle"
    interval: float = EVEN_INTERVAL_S  # the even cadence's spacing
    max_requests: int = 0  # the first N requests only (0: all)
    cache: str = "prefix"  # prefix | anthropic (the breakpoint cache) | responses (= prefix)
    optimal: bool = False  # also the offline-optimal schedule (bench.optimal)


def model_of(conv: dict[str, Any]) -> str:
    """The corpus model when litellm knows its window, else gpt-4o."""
    named = (conv.get("meta") or {}).get("model")
    return named if isinstance(named, str) and context_window(named) else FALLBACK_MODEL


def budget_of(model: str, configured: int | None) -> int:
    """As ``Engine.budget_for``: min(configured, window − output reserve)."""
    window = context_window(model) or context_window(FALLBACK_MODEL) or 128_000
    limits = [max(256, window - Settings().pipeline.output_reserve_tokens)]
    if configured:
        limits.append(configured)
    return min(limits)


def timeline(
    conv_id: str,
    prefixes: list[list[Message]],
    seed: int,
    cadence: str = "idle",
    interval: float = EVEN_INTERVAL_S,
) -> list[float]:
    """Simulated send time of each request. ``every-turn``: uniform(2, 10) s between any two
    requests; ``idle``: the same, but a user turn after the first waits a lognormal idle gap
    instead (the random stream is exactly the one this clock always drew, so seeds reproduce);
    ``even``: ``interval`` seconds between any two requests. Seeded per conversation, so
    ``--limit`` never changes a conversation's clock."""
    if cadence not in CADENCES:
        raise ValueError(f"unknown cadence {cadence!r}")
    rng = random.Random(f"{seed}:{conv_id}")
    now, out = 0.0, []
    for k, prefix in enumerate(prefixes):
        if k:
            if cadence == "even":
                now += interval
            elif cadence == "idle" and role(prefix[-1]) == "user":
                now += rng.lognormvariate(math.log(USER_GAP_MEDIAN_S), USER_GAP_SIGMA)
            else:
                now += rng.uniform(*STEP_S)
        out.append(now)
    return out
