"""Reading a request-log row for people: the data behind ``ctxproxy show``, the /ui pages and
the metrics. Generic over the report shape (design section 6), so sections a rule adds later show
up without changes here; every reader tolerates missing or oddly shaped parts."""

from __future__ import annotations

import contextlib
import difflib
import re
from collections import Counter
from typing import Any

import orjson

from rules.context.measure import SECTIONS
from rules.messages import call_arguments_text, call_name, role, text_of, tool_calls

MAX_DIFF_LINES = 60  # per changed message: a pruned 5,000-line log must not flood the view


# What a terminal would act on rather than show: C0 controls but tab and newline (ESC starts
# colours, OSC 8 hyperlinks, title changes, cursor moves; BEL, CR, backspace), DEL, C1 controls
# (0x9b is a one-byte CSI), and the bidi marks, embeddings, overrides and isolates that reorder
# what is shown. Rich leaves most of them in its output.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on made visible (``\\x1b``,
    ``\\u202e``); tab and newline stay."""
    return _UNSAFE.sub(_visible, text.replace("\r\n", "\n"))


def for_terminal(value: Any) -> Any:
    """A copy of a log row (or any part of one) with every string in it, keys included,
    terminal-safe: what ``show`` and ``logs`` print all comes from a request. Captured bodies
    are JSON text, whose escapes (``\\u001b``) decode to the raw characters: they are decoded
    first, then made safe."""
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and k.endswith("_body") and isinstance(v, (str, bytes)):
                with contextlib.suppress(orjson.JSONDecodeError):
                    v = orjson.loads(v)
            out[for_terminal(k)] = for_terminal(v)
        return out
    if isinstance(value, (list, tuple)):
        return [for_terminal(v) for v in value]
    return value


_UNSAFE_IN_JSON = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def json_for_terminal(value: Any, indent: bool = False) -> str:
    """JSON text for ``--json``: orjson escapes C0 controls but writes DEL, C1 controls and bidi
    marks raw; they appear only inside strings, so ``\\u`` escapes keep the same data."""
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 if indent else 0).decode()
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def report_of(row: dict[str, Any]) -> dict[str, Any]:
    report = row.get("report")
    return report if isinstance(report, dict) else {}


def sections(row: dict[str, Any]) -> list[dict[str, Any]]:
    """[{name, before, after}] in the measure rule's order, then any section it does not know."""
    raw = row.get("sections") or report_of(row).get("sections") or {}
    if not isinstance(raw, dict):
        return []
    names = [n for n in SECTIONS if n in raw] + sorted(n for n in raw if n not in SECTIONS)
    out = []
    for name in names:
        item = raw[name] if isinstance(raw[name], dict) else {}
        out.append(
            {"name": name, "before": _int(item.get("before")), "after": _int(item.get("after"))}
        )
    return out


def items(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = report.get(key)
    if not isinstance(value, list):
        return []
    return [v if isinstance(v, dict) else {"value": v} for v in value]


def item_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Union of the items' keys, in order of first appearance."""
    cols: dict[str, None] = {}
    for r in rows:
        cols.update(dict.fromkeys(r))
    return list(cols)


def cell(value: Any, limit: int = 120) -> str:
    """One table cell: scalars as they are, structures as compact JSON, long text cut."""
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, (int, bool)):
        text = str(value)
    else:
        text = orjson.dumps(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def freed_by_stage(report: dict[str, Any]) -> dict[str, int]:
    """Tokens freed per pruning stage. Takes ``prune.stages`` when the rule reports totals (a dict
    stage → tokens, or a list of {stage|name, tokens_freed}); else sums the ``pruning`` items."""
    prune = report.get("prune")
    stages = prune.get("stages") if isinstance(prune, dict) else None
    out: Counter[str] = Counter()
    if isinstance(stages, dict):
        for name, value in stages.items():
            freed = value.get("tokens_freed") if isinstance(value, dict) else value
            out[str(name)] += _int(freed)
    elif isinstance(stages, list):
        for s in stages:
            if isinstance(s, dict):
                name = s.get("stage") or s.get("name") or "unknown"
                out[str(name)] += _int(s.get("tokens_freed"))
    else:
        for item in items(report, "pruning"):
            stage = item.get("stage") or item.get("action") or "unknown"
            out[str(stage)] += _int(item.get("tokens_freed"))
    return {k: v for k, v in out.items() if v}


def repair_kinds(report: dict[str, Any]) -> dict[str, int]:
    return dict(Counter(str(r.get("kind") or "unknown") for r in items(report, "repairs")))


def timings(report: dict[str, Any]) -> list[tuple[str, float]]:
    raw = report.get("timings_ms")
    if not isinstance(raw, dict):
        return []
    return [(str(k), float(v)) for k, v in raw.items() if isinstance(v, (int, float))]


def upstream_ms(row: dict[str, Any]) -> float | None:
    """Time spent upstream: total latency minus what the proxy added before forwarding."""
    latency, overhead = row.get("latency_ms"), row.get("overhead_ms")
    if latency is None or overhead is None or not row.get("upstream"):  # never forwarded
        return None
    return max(0.0, float(latency) - float(overhead))


def usage_summary(row: dict[str, Any]) -> list[tuple[str, Any]]:
    report = report_of(row)
    tokens = found if isinstance(found := report.get("tokens"), dict) else {}
    up = upstream_ms(row)
    pairs: list[tuple[str, Any]] = [
        ("status", row.get("status")),
        ("tokens before", row.get("tokens_before")),
        ("tokens after", row.get("tokens_after")),
        ("budget", tokens.get("budget")),
        ("prefix reuse", report.get("prefix_reuse")),
        ("prompt tokens (upstream)", row.get("prompt_tokens")),
        ("cached tokens", row.get("cached_tokens")),
        ("cached share", _share(row.get("cached_tokens"), row.get("prompt_tokens"))),
        ("completion tokens", row.get("completion_tokens")),
        ("overhead ms", row.get("overhead_ms")),
        ("upstream ms", round(up, 3) if up is not None else None),
        ("latency ms", row.get("latency_ms")),
        ("ttfb ms", row.get("ttfb_ms")),
    ]
    pairs.extend(_cost_pairs(report))
    if row.get("error_type"):
        pairs.append(("error", f"{row['error_type']}: {cell(row.get('error'), 300)}"))
    if row.get("client_disconnected"):
        pairs.append(("client disconnected", True))
    return pairs


def _cost_pairs(report: dict[str, Any]) -> list[tuple[str, Any]]:
    """The cost model's facts and an overflow rescue, when the report has them."""
    pairs: list[tuple[str, Any]] = []
    cache = report.get("cache")
    if isinstance(cache, dict):
        pairs += [
            ("cache read ratio", f"{cache.get('read_ratio')} ({cache.get('source')})"),
            ("cache ttl s", cache.get("ttl_s")),
            ("cache min prefix", cache.get("min_prefix")),
            ("last cached tokens", cache.get("last_cached_tokens")),
            ("idle s", cache.get("idle_s")),
        ]
    prune = report.get("prune")
    plan = prune.get("schedule") if isinstance(prune, dict) else None
    if isinstance(plan, dict):
        pairs.append(
            (
                "compaction",
                f"{plan.get('decision')} (cache {plan.get('cache')}: {plan.get('why')}; "
                f"bust {plan.get('bust_cost')}, saving {plan.get('expected_saving')}, "
                f"horizon {plan.get('horizon')} requests)",
            )
        )
    inject = report.get("inject")
    if isinstance(inject, dict) and ("sticky" in inject or inject.get("added")):
        added = ("delta" if inject.get("delta") else "whole") if inject.get("added") else "none"
        pairs.append(("injected blocks", f"{inject.get('sticky', 0)} replayed, added: {added}"))
    marks = report.get("breakpoints")
    if isinstance(marks, dict):
        pairs.append(("cache breakpoints", ", ".join(map(str, marks.get("placed") or [])) or "-"))
    rescue = report.get("rescue")
    if isinstance(rescue, dict):
        pairs.append(
            (
                "overflow rescue",
                f"{rescue.get('outcome')}: window {rescue.get('window')}, "
                f"{rescue.get('tokens_before')} → {rescue.get('tokens_after')} tokens",
            )
        )
    return pairs


# ----- the client's messages against the forwarded ones -----


def message_lines(message: dict[str, Any]) -> list[str]:
    lines = text_of(message.get("content")).splitlines()
    if message.get("tool_call_id"):
        lines.insert(0, f"(result of {message['tool_call_id']})")
    for c in tool_calls(message):
        lines.append(f"→ {call_name(c)}({call_arguments_text(c)}) [{c.get('id', '')}]")
    return lines


def _messages(body: Any) -> list[dict[str, Any]] | None:
    if isinstance(body, str):
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
    msgs = body.get("messages") if isinstance(body, dict) else None
    return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else None


def message_diff(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The client's messages against the forwarded ones, aligned message by message; None when
    the payloads were not captured. Entries: {op: same|changed|removed|added, ...}."""
    client, forwarded = _messages(row.get("request_body")), _messages(row.get("forwarded_body"))
    if client is None or forwarded is None:
        return None
    keys_a = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in client]
    keys_b = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in forwarded]
    out: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            out.append({"op": "same", "client": [a1, a2 - 1], "forwarded": [b1, b2 - 1]})
            continue
        # Inside a changed block, pair messages in the same slot (role and tool call id), so an
        # inserted synthetic result is "added" rather than a rewrite of the next user turn.
        inner = difflib.SequenceMatcher(
            None,
            [_slot(m) for m in client[a1:a2]],
            [_slot(m) for m in forwarded[b1:b2]],
            autojunk=False,
        )
        for op2, i1, i2, j1, j2 in inner.get_opcodes():
            if op2 == "equal":
                for i, j in zip(range(a1 + i1, a1 + i2), range(b1 + j1, b1 + j2), strict=True):
                    out.append(_changed(i, client[i], j, forwarded[j]))
                continue
            for i in range(a1 + i1, a1 + i2):
                out.append(
                    {
                        "op": "removed",
                        "client": i,
                        "role": role(client[i]),
                        "lines": _cap(["- " + x for x in message_lines(client[i])]),
                    }
                )
            for j in range(b1 + j1, b1 + j2):
                out.append(
                    {
                        "op": "added",
                        "forwarded": j,
                        "role": role(forwarded[j]),
                        "lines": _cap(["+ " + x for x in message_lines(forwarded[j])]),
                    }
                )
    return out


def _slot(message: dict[str, Any]) -> tuple[str, str]:
    return role(message), str(message.get("tool_call_id") or "")


def _changed(i: int, a: dict[str, Any], j: int, b: dict[str, Any]) -> dict[str, Any]:
    diff = difflib.unified_diff(message_lines(a), message_lines(b), lineterm="", n=1)
    lines = [x for x in diff if not x.startswith(("---", "+++"))]
    if not lines:  # same text, different fields (e.g. a re-serialised id): show the fields
        lines = [f"- {orjson.dumps(a).decode()}", f"+ {orjson.dumps(b).decode()}"]
    return {"op": "changed", "client": i, "forwarded": j, "role": role(b), "lines": _cap(lines)}


def _cap(lines: list[str]) -> list[str]:
    if len(lines) <= MAX_DIFF_LINES:
        return lines
    return [*lines[:MAX_DIFF_LINES], f"… {len(lines) - MAX_DIFF_LINES} more lines"]


def _share(part: Any, whole: Any) -> str | None:
    """Share of the prompt the upstream served from its cache (cached input costs ~10%)."""
    if not isinstance(part, (int, float)) or not isinstance(whole, (int, float)) or whole <= 0:
        return None
    return f"{part / whole:.0%}"


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
