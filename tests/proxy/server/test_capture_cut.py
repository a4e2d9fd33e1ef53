"""A captured body past ``CAPTURE_MAX_BYTES`` has its strings cut (``capture_bound.within``),
then is redacted (``body_work.captured_json``): the cut reads past itself before it redacts, so a
secret it splits keeps none of its beginning in the log."""

from __future__ import annotations

import pytest

from proxy.server.capture_bound import within
from rules.redact import REDACTED, redact

PASSWORD = "S3cretPassw0rdX9"
KEY = "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngAbCdEf1234"


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        (f" postgres://admin:{PASSWORD}@db.internal/app", PASSWORD[:3]),
        (f" the token {KEY} works", KEY[:8]),
        (" AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ok", "wJalr"),
    ],
)
@pytest.mark.parametrize("lead", [90, 400, 5000])
def test_a_secret_the_capture_cut_splits_keeps_none_of_its_beginning(
    text: str, gone: str, lead: int
) -> None:
    content = "x" * lead + text
    for cut in range(lead + 4, lead + len(text) - 4, 3):
        body = {"messages": [{"role": "user", "content": content}]}
        kept = redact(within(body, 10**9, limit=cut + 4))["messages"][0]["content"]
        assert "more characters not captured" in kept
        assert gone not in kept, (cut, kept[-80:])


def test_a_cut_splitting_no_secret_keeps_what_it_kept() -> None:
    body = {"messages": [{"role": "user", "content": "hello world " * 50}]}
    kept = redact(within(body, 10**9, limit=104))["messages"][0]["content"]
    assert kept.startswith("hello world " * 8) and REDACTED not in kept
    assert kept.index("[ctxproxy") == 100
