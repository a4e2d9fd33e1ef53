"""The server secret: made by the store's migration at first start (``m012_principals``), kept in
its ``secrets`` table, read once at start-up. Every replica sharing a store reads the same one, so
they name a client's credential alike (``proxy.principals``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.store.base import Store

PRINCIPALS = "principals"


async def server_secret(store: Store, name: str = PRINCIPALS) -> bytes:
    row = await store.fetchrow(
        f"SELECT value FROM secrets WHERE name = {store.dialect.mark(1)}", (name,)
    )
    if row is None:
        raise RuntimeError(f"the store has no {name!r} secret: its migrations did not run")
    return bytes.fromhex(str(row[0]))
