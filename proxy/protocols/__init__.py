"""The inbound protocols: Chat Completions, Anthropic Messages and the Responses API. Each has an
adapter that maps a request to the rules' one message model (Chat Completions messages, "the chat
view") and maps the rules' edits back as patches on the client's own structure, so whatever the
rules left alone is forwarded as the client sent it: thinking signatures, encrypted reasoning,
item ids, cache breakpoints, unknown keys, string or list content. Also here: each protocol's
body reading (``body_memory``: a session's next body parsed only where its bytes differ; the
limits on what a body holds, checked on its bytes before parsing: ``body_limits``), validation,
error shape and final integrity check.

May import ``rules`` (messages, base, redact) and the top-level ``errors`` and ``tokens``; never
``proxy.server``, ``proxy.rewrite`` or ``proxy.store``."""
