"""An upstream's error body is kept in the log row cut to its first 2,000 characters: a key the
cut falls in is redacted whole, not kept in part (redacted after the cut, its start stayed)."""

from __future__ import annotations

import time

import pytest

from proxy.server.log_fields import completion_fields

KEY = "AKIAIOSFODNN7EXAMPLQ"  # an AWS access key id's form


@pytest.mark.parametrize("split", [4, 8, 12, 16])
def test_a_key_the_cut_falls_in_is_not_kept_in_part(split: int) -> None:
    head = '{"error": {"message": "denied for '
    pad = "x" * (2000 - split - len(head) - len(" key "))
    body = f'{head}{pad} key {KEY} in us-east-1"}}}}'.encode()
    assert body[:2000].endswith(KEY[:split].encode())  # the cut falls ``split`` into the key
    fields = completion_fields({}, time.perf_counter(), 400, None, None, response_body=body)
    error = fields["error"]
    assert fields["error_type"] == "upstream_status"
    assert "AKIA" not in error and KEY[:split] not in error
    assert len(error) <= 2000
