"""Structured logs: one JSON line per request on stderr, with ids, sizes and timings only; never
a body, never a key. The level comes from ``logging.level``: successful requests log at INFO,
client errors (4xx) at WARNING, failures (5xx) at ERROR. ``logging.json_lines: false`` writes the
same fields as ``key=value`` text."""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import sys
import time
from typing import IO, Any

import orjson

from proxy.settings import LoggingSettings
from rules.redact import redact_text, redacted_prefix
from rules.report import listed_count

# Fields copied from the log row: ids, sizes, usage, timings. Bodies and error text stay out.
ROW_FIELDS = {
    "request_id": "id",
    "session": "session_id",
    "parent_session": "parent_session_id",
    "model": "model",
    "upstream": "upstream",
    "status": "status",
    "stream": "stream",
    "tokens_before": "tokens_before",
    "tokens_after": "tokens_after",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "cached_tokens": "cached_tokens",
    "overhead_ms": "overhead_ms",
    "latency_ms": "latency_ms",
    "ttfb_ms": "ttfb_ms",
    "error_type": "error_type",
}


def level_for(status: Any, error_type: Any = None) -> int:
    """ERROR for a 5xx (or no status), WARNING for a 4xx and for a stream that began with 200 and
    ended in an error (the upstream broke off, its own error event): a failed answer, whatever
    its status line said."""
    if not isinstance(status, int) or status >= 500:
        return logging.ERROR
    return logging.WARNING if status >= 400 or error_type else logging.INFO


class _Seconds:
    """``datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")``, its date and time
    to the second written once a second: a datetime made and written for each line cost ~10 µs
    of a request's CPU (cold code), this a fraction of that."""

    def __init__(self) -> None:
        self._second = math.nan  # no second yet (NaN equals none; -1.0 is 1969-12-31T23:59:59)
        self._prefix = ""

    def iso(self, now: float) -> str:
        frac, second = math.modf(now)
        micros = round(frac * 1e6)  # as ``fromtimestamp`` rounds: half to even, on the same float
        if micros >= 1_000_000 or micros < 0:  # a carry into the next second, or before 1970
            return dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="milliseconds")
        if second != self._second:
            day = dt.datetime.fromtimestamp(second, dt.UTC)
            self._second, self._prefix = second, day.isoformat(timespec="seconds")[:-6]
        return f"{self._prefix}.{micros // 1000:03d}+00:00"


_SECONDS = _Seconds()


def floor_warning(row: dict[str, Any]) -> dict[str, Any] | None:
    """The request's ``budget_below_floor`` warning (prune's, the first of a session over a
    budget below what its every request carries: ``rules.context.budget_floor``), or None."""
    report = row.get("report")
    found = report.get("warnings") if isinstance(report, dict) else None
    for warning in found if isinstance(found, list) else ():
        if isinstance(warning, dict) and warning.get("kind") == "budget_below_floor":
            return warning
    return None


def row_level(row: dict[str, Any]) -> int:
    """``level_for`` the row, WARNING at least for the request that says its session's budget
    is below its floor (once a session)."""
    level = level_for(row.get("status"), row.get("error_type"))
    if level < logging.WARNING and floor_warning(row) is not None:
        return logging.WARNING
    return level


def request_record(row: dict[str, Any], now: float) -> dict[str, Any]:
    """The log line's fields for one completed request."""
    report = found if isinstance(found := row.get("report"), dict) else {}
    record: dict[str, Any] = {
        "ts": _SECONDS.iso(now),
        "level": logging.getLevelName(row_level(row)),
        "event": "request",
    }
    for out, col in ROW_FIELDS.items():
        if row.get(col) is not None:
            record[out] = row[col]
    record["repairs"] = listed_count(report, "repairs")
    record["pruned"] = listed_count(report, "pruning")
    errors = [e.get("rule") for e in report.get("rule_errors") or [] if isinstance(e, dict)]
    if errors:
        record["rule_errors"] = errors
    if row.get("client_disconnected"):
        record["client_disconnected"] = True
    below = floor_warning(row)
    if below is not None:  # said once a session: both numbers, and why
        record["budget"], record["floor"] = below.get("budget"), below.get("floor")
        record["warning"] = below.get("note")
    line = row.get("cache")
    if isinstance(line, dict):  # the cache line (``proxy.attribution``): outcome, cause, re-bill
        record["cache"] = line.get("outcome")
        if line.get("cause"):
            record["cache_cause"] = line["cause"]
            record["rebilled_tokens"] = line.get("rebilled")
    return record


_BARE = re.compile(r"[A-Za-z0-9_.,:/@+\-]+")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e\u00a0-\u2027\u202a-\uffff]")
# What orjson leaves raw in a JSON string but a terminal acts on: DEL, C1 controls, bidi marks,
# overrides and isolates (they reorder what the reader sees).
_TERMINAL_UNSAFE = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(line: str) -> str:
    """``line`` (JSON text) with the characters a terminal would act on written as ``\\uXXXX``
    escapes: the same JSON, safe to print."""
    if line.isascii():
        return line
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


def text_value(value: Any) -> str:
    """A ``key=value`` value: bare when plainly safe, else a JSON string (quotes, backslashes,
    control and line-separator characters escaped), so a client-chosen value (a session id, a
    model name) can neither break the line nor forge fields."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        text = ",".join(value)  # rule_errors=measure,prune
    elif isinstance(value, (list, dict)):
        text = orjson.dumps(value).decode()
    else:
        text = str(value)
    if _BARE.fullmatch(text):
        return text
    quoted = orjson.dumps(text).decode()
    return terminal_safe(_UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted))


class JsonLog:
    """Request observer writing one line per request to ``stream`` (stderr by default, looked up
    when writing so a redirected stderr is honoured)."""

    def __init__(self, settings: LoggingSettings, stream: IO[str] | None = None) -> None:
        self.threshold = logging.getLevelName(settings.level)
        self.json_lines = use_json(settings, stream or sys.stderr)
        self.stream = stream

    def started(self) -> None:
        pass

    def finished(self, row: dict[str, Any]) -> None:
        if row_level(row) < self.threshold:
            return
        record = request_record(row, time.time())
        if self.json_lines:
            line = terminal_safe(orjson.dumps(record).decode())
        else:
            line = " ".join(f"{k}={text_value(v)}" for k, v in record.items())
        out = self.stream or sys.stderr
        out.write(line + "\n")
        out.flush()


# Characters of a record's message or traceback kept: the rest is cut (redacted before the cut)
MAX_RECORD_CHARS = 16_000


def redacted_record_text(text: str) -> str:
    """A record's message or traceback, redacted: its call site may quote a client's text (a
    model name refused, a path, an exception's message holding part of a request), and a
    record that does not redact it would put a key on stderr."""
    if len(text) <= MAX_RECORD_CHARS:
        return redact_text(text)
    return redacted_prefix(text, MAX_RECORD_CHARS) + "…"


class JsonFormatter(logging.Formatter):
    """The proxy's own log records (a rule or an observer that failed …) as JSON lines too,
    redacted."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "event": "log",
            "logger": record.name,
            "message": redacted_record_text(record.getMessage()),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return terminal_safe(orjson.dumps(out).decode())

    def formatException(self, ei: Any) -> str:
        return redacted_record_text(super().formatException(ei))


def printable(text: str) -> str:
    """``text`` with line breaks, control characters and bidi marks written as ``\\uXXXX``
    escapes: one line, nothing a terminal acts on."""
    if text.isprintable() and text.isascii():
        return text
    escaped = _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return _TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", escaped)


class TextFormatter(logging.Formatter):
    """The proxy's own log records as text (a person at a terminal): the message made
    ``printable``. A message may carry a client's text (a session name held too long, a
    provider's error quoting the request): its line breaks would forge lines, its escape
    sequences act on the reader's terminal. A traceback (ours) keeps its lines. Both redacted."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(redacted_record_text(record.message))
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return redacted_record_text(super().formatException(ei))


def use_json(settings: LoggingSettings, stream: IO[str]) -> bool:
    """JSON lines when asked, or (``auto``) when nobody reads ``stream`` on a terminal."""
    if settings.json_lines == "auto":
        isatty = getattr(stream, "isatty", None)
        return not (callable(isatty) and isatty())
    return bool(settings.json_lines)


def configure(settings: LoggingSettings) -> None:
    """For ``ctxproxy serve`` (the process owns its logging): the ``ctxproxy`` loggers go to
    stderr at the configured level, as JSON lines when ``json_lines`` is on."""
    handler = logging.StreamHandler(sys.stderr)
    json_lines = use_json(settings, sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    root = logging.getLogger("ctxproxy")
    root.handlers[:] = [handler]
    root.setLevel(settings.level)
    root.propagate = False


def setup(app: Any, services: Any) -> None:
    """Setup hook: subscribe the request log; ``app.state.log_stream`` redirects it (tests)."""
    stream = getattr(app.state, "log_stream", None)
    services.observers.add(JsonLog(services.settings.logging, stream))
