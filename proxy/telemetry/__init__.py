"""What a running proxy tells its operator: the request observers, Prometheus ``/metrics`` and
the JSON request lines on stderr.

May import ``proxy.store`` (the log, for ``/metrics``' gauges), ``proxy.inspect.report_view``
(what a logged report says: repairs by kind, tokens freed by stage) and the top-level ``auth``,
``errors`` and ``settings``."""
