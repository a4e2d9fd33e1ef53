"""Looking back at requests: ``ctxproxy show`` and ``logs`` in the terminal, and the ``/ui``
pages (server-rendered templates, SVG charts, no JavaScript). Off the hot path: nothing in
``server``, ``rewrite`` or ``upstream`` imports it.

May import ``proxy.store`` (read queries), ``rules`` (section names) and the top-level ``auth``,
``errors`` and ``settings``."""
