"""An upstream quoting the request back in its error (a validation error's input) sent a MiB of
the client's text to be redacted on the event loop: 4 s of it for text dense in secrets' names.
A client is shown 32 K characters of an error's text at most, redacted before the cut."""

from __future__ import annotations

import time

import orjson

from proxy.upstream.error_redaction import ErrorRedactor

REDACTOR = ErrorRedactor(["sk-server-0123456789abcdefghij"])
GITHUB = "ghp_Aa1Bb2Cc3DAa1Bb2Cc3DAa1Bb2Cc3DChK5Um"


def test_a_quoted_mib_is_cut_and_redacted_quickly() -> None:
    message = "Invalid input: " + "aws_secret_access_key password token " * 30_000
    body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    started = time.process_time()
    out = REDACTOR.body(body)
    assert time.process_time() - started < 1.0  # 3.9 s before
    error = orjson.loads(out)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("Invalid input: aws_secret_access_key")
    assert 30_000 < len(error["message"]) < 34_000 and error["message"].endswith("\u2026")


def test_a_key_at_the_cut_is_not_kept_in_part() -> None:
    for shift in range(0, 40, 3):
        text = "x" * (32 * 1024 - 20 + shift) + " " + GITHUB + " and more"
        for out in (REDACTOR.text(text), orjson.loads(REDACTOR.body(orjson.dumps([text])))[0]):
            assert GITHUB[4:12] not in out, shift


def test_the_strings_share_the_cut() -> None:
    parts = [f"part {i} " + "y" * 10_000 for i in range(20)]
    out = orjson.loads(REDACTOR.body(orjson.dumps({"errors": parts})))["errors"]
    assert len(out) == 20 and out[0] == parts[0] and out[1] == parts[1]
    assert sum(map(len, out)) < 34_000 and out[-1] == "\u2026"


def test_a_short_error_body_passes_as_it_came() -> None:
    body = b'{"error": {"message": "bad  request", "code": 400}}'
    assert REDACTOR.body(body) is body
