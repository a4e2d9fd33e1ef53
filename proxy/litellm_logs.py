"""litellm's own log records, under the proxy's redaction and bounds. litellm redacts its error
strings with patterns of its own, on the whole text: a provider's error quoting 3 MB of the
request back cost 5–25 s of the event loop there, for log payloads no one reads (the proxy logs
each failure itself, redacted and cut: ``litellm_errors.failure``). So its secret redaction is
off (``LITELLM_DISABLE_REDACT_SECRETS``, set before the import) and every record its loggers
still write is cut and redacted by the proxy's rules here. Below CRITICAL they write nothing
unless the operator asked for litellm's logs (``LITELLM_LOG``): the failures they report are in
the proxy's own log already."""

from __future__ import annotations

import logging
import os

from rules.redact import redacted_prefix

LOGGERS = ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router")
MAX_RECORD_CHARS = 4_000  # of one of litellm's records, as written: the rest is cut


class _Redacted(logging.Filter):
    """A record's message redacted and cut, its traceback dropped (the proxy logs its own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redacted_prefix(record.getMessage(), MAX_RECORD_CHARS)
        record.args = None
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def before_import() -> None:
    os.environ.setdefault("LITELLM_DISABLE_REDACT_SECRETS", "true")


def after_import() -> None:
    asked = bool(os.environ.get("LITELLM_LOG"))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Redacted) for f in logger.filters):
            logger.addFilter(_Redacted())
        if not asked:
            logger.setLevel(logging.CRITICAL)
