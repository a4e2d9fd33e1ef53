"""Why each request's prompt cache hit or missed, and what a miss cost: the proxy's own
attribution (``probe``: what the request changed against the session's previous one, taken when
it is rewritten; ``attribute``: the cause once the upstream's usage is known; ``payback``: a
compaction's re-bill against what it saved later), kept per session by ``ledger``, priced with
the schedule's own ``rules.base.CacheFacts``; and the provider's own explanation when asked
(``diagnostics``).

May import ``rules`` only: the engine (``proxy.rewrite``) and the server hold it."""
