"""``bench.overhead_protocols``' table: one line per cell, ctxproxy beside its floor and LiteLLM."""

from __future__ import annotations

from typing import Any


def print_table(rows: list[dict[str, Any]], with_litellm: bool) -> None:
    """One line per cell; the floor (``bench.bare_relay``) beside ctxproxy: its added p50 / p99,
    and ctxproxy's added p50 less the floor's (what ctxproxy's own work adds); the whole
    latency's p99 ÷ p50 of direct, ctxproxy and the floor."""
    head = (
        "| protocol | workload | stream | conc | direct p50 | ctxproxy added p50 / p95 / p99 "
        "| in-proxy p50 / p99 | floor added p50 / p99 | ctxproxy − floor (p50) "
        "| p99 ÷ p50: direct / ctxproxy / floor |"
    )
    if with_litellm:
        head += " LiteLLM added p50 / p95 / p99 | LiteLLM ÷ ctxproxy (p50) |"
    print("\n" + head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        line = (
            f"| {r['protocol']} | {r['messages']} msgs, {r['bytes'] / 1024:.0f} KB | "
            f"{'yes' if r['stream'] else 'no'} | {r['concurrency']} | {r['direct_p50']:.2f} ms | "
            f"{r['ctxproxy_p50']:.2f} / {r['ctxproxy_p95']:.2f} / {r['ctxproxy_p99']:.2f} ms | "
            f"{r['in_proxy_p50']:.2f} / {r['in_proxy_p99']:.2f} ms | "
            f"{r['floor_p50']:.2f} / {r['floor_p99']:.2f} ms | "
            f"{r['ctxproxy_p50'] - r['floor_p50']:+.2f} ms | "
            f"{r['direct_tail']:.1f} / {r['ctxproxy_tail']:.1f} / {r['floor_tail']:.1f} |"
        )
        if with_litellm:
            if "litellm_p50" in r:
                ratio = r["litellm_p50"] / max(r["ctxproxy_p50"], 0.01)
                line += (
                    f" {r['litellm_p50']:.2f} / {r['litellm_p95']:.2f} / "
                    f"{r['litellm_p99']:.2f} ms | {ratio:.0f}× |"
                )
            else:
                line += " — | — |"
        print(line)
