"""Persistence: the SQLite store (the request log and the session state, one writer task,
named migrations), the upstream's cache report per session, and the redaction of session state
before it is cached or written.

May import ``rules`` (the state's types and the redactor); no other ``proxy`` subpackage."""
