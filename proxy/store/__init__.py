"""Persistence: one store interface (``base``) and its two implementations, SQLite (``sqlite``, the
embedded default) and PostgreSQL (``postgres``, shared by a gateway's replicas: ``pg_session``,
``pg_writer``, ``pg_queries``, ``pg_migrations``); the request log's batches (``batch``) and the
SQL that differs between the two (``dialect``); named migrations; the upstream's cache report per
session; the redaction of session state before it is cached or written; the bounds on a
session's state and on the cache of states, in bytes (``state_bytes``); retention.

May import ``rules`` (the state's types and the redactor); no other ``proxy`` subpackage."""
