"""The bytes the writes queued for the database hold, bounded (``store.buffer_bytes``) beside
their count (``store.buffer_rows``): with ``capture_payloads`` a request's row carries its
redacted bodies (up to the body limit each) and its answer, so rows queued while the database
cannot take them (SQLite's file locked, PostgreSQL away) held memory by the gigabyte, and one
tenant's large requests during an outage took what every tenant's requests need. One principal
holds at most half the bound: another tenant's rows still find room (an unverified passthrough
principal is charged to its lane, ``proxy.charge_groups``, as in the shared maps)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from proxy.charge_groups import charged_to
from proxy.principals import split_scoped

BUFFER_BYTES = 256 << 20  # store.buffer_bytes by default
OP_BYTES = 512  # what a write holds beside its strings (its dicts, numbers, a bounded report)
MAX_OWNERS = 10_000  # request ids remembered whose row is queued but not yet finished


def _held(values: Any) -> int:
    return OP_BYTES + sum(len(v) for v in values if isinstance(v, (str, bytes)))


class WriteBudget:
    """What each queued write is charged (its strings' lengths), in all and by principal."""

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.held = 0
        self._by: dict[str, int] = {}
        self._charged: dict[int, tuple[str, int]] = {}  # id(op) -> (principal, bytes)
        self._owners: OrderedDict[str, str] = OrderedDict()  # request id -> its principal

    def _cost(self, op: Any) -> tuple[str, int]:
        row = getattr(op, "row", None)
        if isinstance(row, dict):  # a request's row: its principal's from now on
            principal = charged_to(str(row.get("principal") or ""))
            rid = row.get("id")
            if isinstance(rid, str):
                self._owners[rid] = principal
                while len(self._owners) > MAX_OWNERS:
                    self._owners.popitem(last=False)
            return principal, _held(row.values())
        fields = getattr(op, "fields", None)
        if isinstance(fields, dict):  # its completion: the row's principal's
            return self._owners.pop(getattr(op, "request_id", ""), ""), _held(fields.values())
        session = getattr(op, "session_id", None)
        if isinstance(session, str):  # a session's state: the cache holds it too
            return charged_to(split_scoped(session)[0]), OP_BYTES
        params = getattr(op, "params", ())
        return "", _held(params if isinstance(params, tuple) else ())

    def take(self, op: Any) -> bool:
        """Charge ``op``; False (nothing charged) when it would pass the bound, or its principal's
        half of it."""
        principal, size = self._cost(op)
        if self.held and self.held + size > self.bound:
            return False
        mine = self._by.get(principal, 0)
        if principal and mine and mine + size > self.bound // 2:
            return False
        self.held += size
        self._by[principal] = mine + size
        self._charged[id(op)] = (principal, size)
        return True

    def give_back(self, op: Any) -> None:
        """``op`` is written (or lost): its bytes are free again."""
        charged = self._charged.pop(id(op), None)
        if charged is None:
            return
        principal, size = charged
        self.held -= size
        left = self._by[principal] - size
        if left:
            self._by[principal] = left
        else:
            del self._by[principal]
