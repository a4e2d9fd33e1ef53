"""What a running proxy tells its operator: the request observers, Prometheus ``/metrics`` and
the JSON request lines on stderr.

May import ``proxy.store`` (the log, for ``/metrics``' gauges) and the top-level ``auth``,
``errors`` and ``settings``."""
