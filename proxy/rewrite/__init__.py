"""From a parsed body to what is forwarded: the body's parsing and validation, the session key
and its lock, the model's window and the token budget (lowered by windows learned from overflow
errors), the cost model (prices and the provider's cache rules), the pipeline runner (with its
cache of per-message records) and the optional resolver model. ``Engine.rewrite`` is the one entry
point, shared by the server and ``ctxproxy rewrite``.

May import ``rules``, ``proxy.store`` (session state, cache feedback), ``proxy.upstream.litellm``
(the resolver model) and the top-level ``errors``, ``settings``, ``pricing`` and ``tokens``; never
``proxy.server``."""
