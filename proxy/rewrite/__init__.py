"""From a parsed body to what is forwarded: the session key, the model's window and the token
budget (lowered by windows learned from overflow errors), the cost model (prices and the
provider's cache rules), the pipeline runner (with its cache of per-message records) and the
optional resolver model. ``Engine.rewrite`` is the one entry point, shared by the server and
``ctxproxy rewrite``: it maps the body to the rules' chat view with its protocol's adapter, holds
the session in the store (serialised across replicas there), runs the pipeline and lifts the
result back; a request bringing much new work does so in one worker thread (``offload``).

May import ``rules``, ``proxy.protocols`` (the adapters), ``proxy.store`` (session state, cache
feedback), ``proxy.upstream.litellm`` (the resolver model) and the top-level ``errors``,
``settings``, ``pricing`` and ``tokens``; never ``proxy.server``."""
