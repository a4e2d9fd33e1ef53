"""The pages that list request rows read them without the captured payloads: a page of 100 rows
of 8 MiB bodies took 350 MB to show columns that never hold them. ``LISTED_COLUMNS`` is the
table's every other column, so a column a migration adds is listed too."""

from __future__ import annotations

from pathlib import Path

from proxy.store.dialect import LISTED_COLUMNS, PAYLOAD_COLUMNS
from proxy.store.sqlite import Store


async def test_the_listed_columns_are_the_tables_but_the_payloads(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "db"), batch_window_s=0)
    await store.open()
    try:
        async with store.reader.execute("SELECT * FROM requests LIMIT 0") as cur:
            columns = [d[0] for d in cur.description]
        assert sorted(columns) == sorted([*LISTED_COLUMNS, *PAYLOAD_COLUMNS])
        await store.insert_request(
            {"id": "req_1", "created_at": 1.0, "session_id": "p/s", "path": "/v1/chat/completions",
             "request_body": "x" * 1000, "forwarded_body": "y" * 1000, "principal": "p"}
        )  # fmt: skip
        await store.flush()
        (listed,) = await store.list_requests(session="p/s", bodies=False)
        (whole,) = await store.list_requests(session="p/s")
    finally:
        await store.close()
    assert not set(PAYLOAD_COLUMNS) & set(listed)
    assert whole["request_body"] == "x" * 1000
    assert {k: v for k, v in whole.items() if k not in PAYLOAD_COLUMNS} == listed
