"""What stops a request's work, as opposed to what fails it.

A native library can raise a ``BaseException`` that is no ``Exception``: pyo3's
``PanicException`` (tiktoken's tokenizer panics on a long run of whitespace) derives from
``BaseException`` directly. Such a failure is one request's: it falls back or is answered in the
protocol's shape like any bug of ours. Only the process or the task being stopped passes through
(``STOPPING``)."""

from __future__ import annotations

import asyncio

STOPPING: tuple[type[BaseException], ...] = (
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
    asyncio.CancelledError,
)


def stopping(exc: BaseException) -> bool:
    """Whether ``exc`` stops the work (to be re-raised) rather than fails it."""
    return isinstance(exc, STOPPING)
