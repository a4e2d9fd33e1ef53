"""The HTTP side of one request: one raw ASGI handler for the three model endpoints (Chat
Completions, Anthropic Messages, the Responses API: authenticate, read, parse, rewrite, forward,
relay, complete the log row), each protocol's ``Wire`` (its parser, adapter, upstream call and
error shape), reading a heavy body in the worker thread (``body_work``), ``count_tokens``, the
websocket refusal, the overflow rescue (compact and retry once
when the upstream says the prompt is too long), the upstream's cache report kept for the
session's next request, the helpers that write ASGI answers by hand, the watch that notices a
client leaving (and ``answer_end``: a client that closes after the answer's last event got it
whole), and the uvicorn protocol that times out slow headers and refuses upgrades.

Reads ``proxy.rewrite`` (what to forward), ``proxy.protocols`` (parsing, error shapes),
``proxy.upstream`` (where), ``proxy.store`` and ``proxy.telemetry`` (the row), ``rules.redact``
(captured payloads), and the top-level ``errors``, ``auth`` and ``settings``. Nothing else in
``proxy`` imports it but ``app`` and ``cli``."""
