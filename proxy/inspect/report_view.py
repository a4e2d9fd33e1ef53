"""Reading a request-log row for people: the data behind ``ctxproxy show``, the /ui pages and
the metrics. Generic over the report shape (design section 6), so sections a rule adds later show
up without changes here; every reader tolerates missing or oddly shaped parts."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from typing import Any

import orjson

from proxy.inspect import payload_diff
from proxy.inspect.payload_diff import MAX_DIFF_LINES as MAX_DIFF_LINES
from proxy.inspect.payload_entries import message_lines as message_lines
from rules.context.measure import SECTIONS

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


def one_line(text: str) -> str:
    """``terminal_safe`` text kept to one line (``\\n`` shown): a field printed on a line of
    its own making, whose line break would forge the next line."""
    return terminal_safe(text).replace("\n", "\\n")


def for_terminal(value: Any, top: bool = True) -> Any:
    """A copy of a log row (or any part of one) with every string in it, keys included,
    terminal-safe: what ``show`` and ``logs`` print all comes from a request. Captured bodies
    are JSON text, whose escapes (``\\u001b``) decode to the raw characters: they are decoded
    first, then made safe. A row's own text fields (``top``: its model, session, error) keep
    no line break either (``\\n`` shown): a model named with one forged a request's line."""
    if isinstance(value, str):
        return terminal_safe(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and k.endswith("_body") and isinstance(v, (str, bytes)):
                with contextlib.suppress(orjson.JSONDecodeError):
                    v = orjson.loads(v)
            elif isinstance(v, str) and top:  # a row's field is printed on its line: a line
                out[for_terminal(k)] = one_line(v)  # a line break forges one
                continue
            out[for_terminal(k, False)] = for_terminal(v, False)
        return out
    if isinstance(value, (list, tuple)):
        return [for_terminal(v, False) for v in value]
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


# ----- billed input: what the provider bills, not the messages alone -----

BILLED_LABEL = "billed input"


def tools_tokens(row: dict[str, Any], when: str) -> int:
    """The tools schema's tokens, ``when`` "before" (as sent) or "after" (as forwarded)."""
    raw = row.get("sections") or report_of(row).get("sections")
    item = raw.get("tools") if isinstance(raw, dict) else None
    return _int(item.get(when)) if isinstance(item, dict) else 0


def billed(row: dict[str, Any], when: str) -> int | None:
    """Input tokens the provider bills for the request as sent (``when`` "before") or as
    forwarded ("after"), in the proxy's count: the messages (system included, each with its
    framing: the row's ``tokens_before``/``tokens_after``) plus the tools schema (its section).
    None when the rules never ran (nothing was measured)."""
    tokens = row.get(f"tokens_{when}")
    if not isinstance(tokens, (int, float)) or isinstance(tokens, bool):
        return None
    return int(tokens) + tools_tokens(row, when)


def with_billed(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with ``billed_before`` and ``billed_after`` set (for the templates)."""
    row["billed_before"], row["billed_after"] = billed(row, "before"), billed(row, "after")
    return row


def listed_title(report: dict[str, Any], key: str, title: str) -> str:
    """A list's heading, saying when the stored report kept only its first items."""
    more = report.get(f"{key}_more")
    if not isinstance(more, int) or more <= 0:
        return title
    shown = len(items(report, key))
    return f"{title} (the first {shown:,} of {shown + more:,})"


def items(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = report.get(key)
    if not isinstance(value, list):
        return []
    return [v if isinstance(v, dict) else {"value": v} for v in value]


# ----- the working set and the references, as text -----

_PLAN_MARKS = {"completed": "x", "done": "x", "in_progress": "~", "in-progress": "~"}
_WS_LABELS = {
    "goal": "Goal",
    "instruction": "Latest instruction",
    "changed_files": "Changed files",
    "latest_writes": "Latest writes",
    "open_diagnostics": "Open diagnostics",
    "plan": "Plan",
    "next_target": "Next repair target",
}
_NOT_LOGGED = "set (its text is not in this log row: logged before reports carried it)"


def _diagnostic_text(d: Any) -> str:
    if not isinstance(d, dict):
        return cell(d, 400)
    file, line = d.get("file"), d.get("line")
    where = f"{file}:{line}" if file and line else file
    parts = [d.get("tool"), where, d.get("code"), d.get("message")]
    text = " ".join(str(p) for p in parts if p)
    command = d.get("command")
    return f"{text} (from `{command}`)" if command else text or cell(d, 400)


def _plan_text(item: Any) -> str:
    if not isinstance(item, dict):
        return cell(item, 400)
    mark = _PLAN_MARKS.get(str(item.get("status")), " ")
    return f"[{mark}] {item.get('text') or cell(item, 300)}"


def _value_lines(value: Any, limit: int = 400) -> list[str]:
    if isinstance(value, list):
        return [cell(v, limit) for v in value]
    if isinstance(value, dict):
        return [f"{k}: {cell(v, limit)}" for k, v in value.items()]
    return [cell(value, limit)]


def working_set_lines(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The request's working set as (label, lines) in the ledger's order, readable text: the
    goal and latest instruction, changed files, latest writes, open diagnostics, the plan, the
    next repair target; keys a later rule adds follow as they are. Empty parts are left out."""
    ws = report.get("working_set")
    if not ws:
        return []
    if not isinstance(ws, dict):
        return [("Working set", _value_lines(ws))]
    out: list[tuple[str, list[str]]] = []
    for key, value in ws.items():
        if value is None or value is False or value == [] or value == "":
            continue
        label = _WS_LABELS.get(str(key), str(key))
        if key in ("goal", "instruction"):
            lines = [_NOT_LOGGED] if value is True else _value_lines(value, 1000)
        elif key == "open_diagnostics" and isinstance(value, list):
            lines = [_diagnostic_text(d) for d in value]
        elif key == "plan" and isinstance(value, list):
            lines = [_plan_text(p) for p in value]
        else:
            lines = _value_lines(value)
        out.append((label, lines))
    return out


def workspace_view(report: dict[str, Any]) -> tuple[list[tuple[str, str]], list[str]] | None:
    """The request's workspace map (``report.workspace``): (facts as label/value, the folded
    tree's lines); None when the request has none."""
    ws = report.get("workspace")
    if not isinstance(ws, dict):
        return None
    facts: list[tuple[str, str]] = [("source", cell(ws.get("source")))]
    if ws.get("root"):
        facts.append(("root", cell(ws["root"])))
    counts = (ws.get("entries"), ws.get("files"), ws.get("folders"), ws.get("changed"))
    facts.append(("size", "{} entries: {} files, {} folders, {} changed".format(*counts)))
    if isinstance(ws.get("bytes"), int):
        facts.append(("stored", f"{ws['bytes']:,} bytes (changed on this request)"))
    left = ws.get("left_out") or {}
    if isinstance(left, dict) and any(left.values()):
        facts.append(("left out", ", ".join(f"{k} {cell(v)}" for k, v in left.items() if v)))
    boot = ws.get("bootstrap")
    if isinstance(boot, dict):
        parts = [f"{cell(boot.get('root'))} in {cell(boot.get('ms'))} ms"]
        if boot.get("error"):
            parts.append(f"error: {cell(boot['error'])}")
        if boot.get("left_out"):
            parts.append(f"left out: {cell(boot['left_out'], 300)}")
        facts.append(("bootstrap", "; ".join(parts)))
    tree = [cell(line, 200) for line in ws.get("tree") or [] if isinstance(line, str)]
    return facts, tree


def _entity_path(entity: Any) -> str | None:
    if isinstance(entity, dict):
        path = entity.get("path") or entity.get("name")
        return str(path) if path else None
    return str(entity) if entity else None


def _decided_by(ref: dict[str, Any]) -> dict[str, Any]:
    """The chain step that found the entity: the resolver model's pick, else the last search."""
    steps = [s for s in ref.get("chain") or [] if isinstance(s, dict)]
    return steps[-1] if steps else {}


def _via(step: dict[str, Any]) -> str | None:
    session, depth = step.get("session"), step.get("depth")
    if not session:
        return None
    if not isinstance(depth, int) or depth == 0:
        return "via this session"
    whose = "parent" if depth == 1 else f"ancestor ({depth} up)"
    return f"via {whose} session {session}"


def reference_text(ref: dict[str, Any]) -> str:
    """One resolved reference as a line: ``"mention" → entity path (confidence, via session)``
    (beyond files its description instead of the path), or what the rule abstained with."""
    mention = f'"{ref.get("mention", "")}"'
    entity = ref.get("entity")
    path = _entity_path(entity)
    step = _decided_by(ref)
    notes: list[str] = []
    if isinstance(entity, dict) and (entity.get("type") or entity.get("action")):
        notes.append(" ".join(str(x) for x in (entity.get("type"), entity.get("action")) if x))
    if isinstance(ref.get("confidence"), (int, float)):
        notes.append(f"confidence {ref['confidence']:g}")
    if path is not None:
        if step.get("resolver") or ref.get("resolved_by"):
            notes.append(f"picked by {step.get('resolver') or ref.get('resolved_by')}")
        if via := _via(step):
            notes.append(via)
        if isinstance(entity, dict) and entity.get("description"):
            path = str(entity["description"])  # beyond files: what it is, with its id
        return f"{mention} → {path} ({'; '.join(notes)})" if notes else f"{mention} → {path}"
    why = str(ref.get("abstained") or "unresolved").replace("_", " ")
    candidates = [str(c) for c in ref.get("candidates") or []]
    if candidates:
        why += ": candidates " + ", ".join(candidates)
    return f"{mention} → no entity ({why}; {'; '.join(notes)})" if notes else f"{mention} → ({why})"


def referenced_entities(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The entities the request's references resolved to (each once), with the mention and the
    session that knew it: what "Entities" means for a request that only points at earlier work."""
    out: dict[str, dict[str, Any]] = {}
    for ref in items(report, "references"):
        path = _entity_path(ref.get("entity"))
        if path is None or path in out:
            continue
        entity = ref["entity"] if isinstance(ref.get("entity"), dict) else {"path": path}
        row = {k: entity.get(k) for k in ("type", "name", "path", "action") if entity.get(k)}
        row["mention"] = ref.get("mention")
        session = _decided_by(ref).get("session")
        if session:
            row["session"] = session
        out[path] = row
    return list(out.values())


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
    if not stages and not report.get("pruning"):
        return {}  # the common request (a metric per request): nothing was freed
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
    if not report.get("repairs"):
        return {}  # the common request (a metric per request)
    return dict(Counter(str(r.get("kind") or "unknown") for r in items(report, "repairs")))


def loop_kinds(report: dict[str, Any]) -> dict[str, int]:
    """Loops break_loops noted on the request, by kind."""
    if not report.get("loops"):
        return {}
    return dict(Counter(str(r.get("kind") or "unknown") for r in items(report, "loops")))


def timings(report: dict[str, Any]) -> list[tuple[str, float]]:
    raw = report.get("timings_ms")
    if not isinstance(raw, dict):
        return []
    return [(str(k), float(v)) for k, v in raw.items() if isinstance(v, (int, float))]


# ----- the client's conversation against the forwarded one -----


def message_diff(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The captured payloads' diff in the row's protocol (``proxy.inspect.payload_diff``); None
    when the payloads were not captured."""
    return payload_diff.diff(row)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0
