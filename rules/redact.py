"""Secret redaction for anything the proxy stores or logs: captured payloads never keep keys.

Two nets: fields whose *name* says secret (``authorization``, ``openai_api_key``,
``client_secret``, ``accessToken`` …, in any case or separator style) lose their value, and
secrets inside *strings* are replaced wherever they appear: key-shaped tokens of common providers
(``rules.redact_shapes``), private key blocks and passwords in URLs
(``postgres://user:[REDACTED]@host``: ``rules.redact_blocks``), ``Authorization`` header values,
``Cookie`` and ``Set-Cookie`` header values (a Set-Cookie's attributes stay), values assigned to
secret names (``PGPASSWORD=…``, ``DB_PW=…``, ``"passWord": "1234"``, ``AWS_SECRET_ACCESS_KEY=…``,
``<password>1234</password>``, a long flag's ``--password 1234``, a name given as a value:
``rules.redact_idents``), and passwords given on a command line (``mysql -p…``, ``curl -u
user:…``, ``sshpass -p …``, ``redis-cli -a …``, ``docker login -p …``: ``rules.redact_flags``),
and passwords given to an HTTP client in code beside their user (``auth=("admin", "…")``:
``rules.redact_calls``); and a secret a command printed alone, known by its call beside
its result in a message list (``rules.redact_results``). A text that is JSON (a tool call's
arguments) is read decoded first (``rules.redact_json_text``).
Counts such as ``max_tokens`` or ``prompt_tokens`` are names of numbers, not of secrets, and
stay.

Every pattern is linear in the text (tests/rules/test_redact_fuzz.py times them on adversarial
input) and starts with a literal or a small set of characters, so ``re`` skips ordinary text with
a fast scan (a leading ``\\b`` or ``(?i)`` tries every position, 10-30x slower). Idempotent.

Bare hex strings are left alone: git SHAs, digests, UUIDs and content hashes fill tool output and
the entity paths kept in session state. A hex run of 32+ characters is redacted only in a secret's
context: assigned to a secret name, or within 32 characters after one (``API key: 9f86…``);
so is a 40-character AWS secret access key (base64 with both cases) printed without ``=``
(``SecretAccessKey |  wJalr…`` in a table), or beside its access key id on a line.
"""

from __future__ import annotations

import functools
from typing import Any

from rules.redact_blocks import redact_private_keys, redact_url_credentials
from rules.redact_calls import redact_call_credentials
from rules.redact_continued import redact_continued
from rules.redact_directives import redact_directives
from rules.redact_escapes import redact_escaped_keys
from rules.redact_json_text import redact_json_text
from rules.redact_known import to_client, without_known
from rules.redact_manifests import redact_secret_data
from rules.redact_md_columns import redact_secret_columns
from rules.redact_names import MIN_SECRET_CHARS as MIN_SECRET_CHARS  # read from here too
from rules.redact_names import is_secret_name as is_secret_name
from rules.redact_names import is_secret_value as is_secret_value
from rules.redact_objects import redact_secret_objects
from rules.redact_pgpass import redact_pgpass
from rules.redact_piped import (
    redact_echoed,
    redact_expected,
    redact_piped,
    redact_secure_strings,
)
from rules.redact_results import printing_calls, redact_printed
from rules.redact_shapes import REDACTED as REDACTED  # the marker, imported from here too
from rules.redact_shapes import redact_key_shapes
from rules.redact_structured import command_words, named_pair
from rules.redact_triggers import is_basic_credentials, redact_after_triggers
from rules.redact_xml_pairs import redact_xml_pairs
from rules.text_cache import text_cache


def redact_text(text: str) -> str:
    """``text`` with every secret in it replaced by ``[REDACTED]``: the server's own by value
    (``redact_known``), the others by shape and context."""
    text = without_known(text)
    if len(text) <= _MEMO_MAX_TEXT:
        return _redact_short(text)
    return _redact_text(text)


# Report and state texts repeat from request to request (a memo hit ~0.3 µs, the patterns ~50 µs
# a kilobyte); tool outputs beyond this size are rarely seen twice and would crowd the memo.
_MEMO_MAX_TEXT = 16_000


def _redact_text(text: str) -> str:
    # first a JSON text's strings, decoded: the patterns read on what they left (escaped)
    text = redact_json_text(text, redact_text)
    text = redact_escaped_keys(redact_key_shapes(redact_private_keys(redact_secret_data(text))))
    text = redact_piped(redact_pgpass(redact_directives(text)))
    text = redact_call_credentials(redact_expected(redact_echoed(text)))
    text = redact_secret_objects(text)  # before the names' values: an object opens no value
    text = redact_secret_columns(redact_xml_pairs(text))
    # last: its quotes may hold another rule's text ("'… curl -b 'sid=…' …")
    text = redact_secure_strings(redact_after_triggers(redact_url_credentials(text)))
    return redact_continued(text)  # after the others: the rest of what they redacted


_redact_short = text_cache(max_chars=8_000_000, max_text_chars=_MEMO_MAX_TEXT)(_redact_text)


# Characters a cut text is read past before it is redacted: a secret the cut would split is
# found whole (a longer one only in part, and its beginning is then redacted: ``_CUT_KEY``).
PREFIX_MARGIN = 2048


def redacted_prefix(text: str, limit: int) -> str:
    """``text``'s first ``limit`` characters, redacted as ``text`` is: read ``PREFIX_MARGIN``
    past the cut, so a key the cut would split is not kept in part (29 of a GitHub token's 30
    characters were, cut to a command's 100 and then redacted). Where redaction shrank the window
    so much that its far end (which may hold a key's part) comes near the cut, more is read."""
    if len(text) <= limit:
        return redact_text(text)
    reach = limit + PREFIX_MARGIN
    while True:
        out = redact_text(text[:reach])
        if reach >= len(text) or len(out) >= limit + PREFIX_MARGIN // 2:
            return out[:limit]
        reach *= 2


def _secret_field(name: Any, value: Any, siblings: dict[Any, Any]) -> bool:
    if not isinstance(name, str) or not value or isinstance(value, (bool, int, float)):
        return False
    if name == "token" and "logprob" in siblings:  # a logprobs entry: the token is text
        return False
    if name == "auth":  # a Docker config's base64 of user:password, not any "auth"
        return isinstance(value, str) and is_basic_credentials(value)
    return is_secret_value(name, value)


# Leaves never redacted (``_secret_field``): most of a report's, taken without a call each.
_PLAIN = frozenset({int, float, bool, type(None)})


def redact(value: Any) -> Any:
    """A redacted deep copy of a JSON-like value: secret-named fields and key-shaped strings."""
    cls = value.__class__
    if cls is dict:
        return _redact_dict(value)
    if cls is str:
        return redact_text(value)
    if cls is list:
        words = command_words(value, redact_text)
        if words is not None:
            return words
        out = [v if v.__class__ in _PLAIN else redact(v) for v in value]
        if value and value[-1].__class__ is dict:  # a message list: results known by their call
            ids = printing_calls(value)
            if ids:
                redact_printed(out, ids)
        return out
    if isinstance(value, dict):
        return _redact_dict(value)
    if isinstance(value, list):
        return redact(list(value))
    if isinstance(value, str):
        return redact_text(value)
    return value


def _redact_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    plain, secret, name, short = _PLAIN, _secret_field, _redact_key, _MIN_SECRET_KEY
    out = {
        (k if len(k) < short else name(k)) if k.__class__ is str else k: v
        if v.__class__ in plain
        else REDACTED
        if secret(k, v, value)
        else redact(v)
        for k, v in value.items()
    }
    pair = named_pair(value)
    if pair is not None:  # ``{"name": "DB_PASSWORD", "value": …}``: the value goes, the name stays
        named, held = pair  # field names no redaction changes: the same keys, in their order
        out[named], out[held] = value[named], REDACTED
    return out


# No secret the texts' net finds is shorter (``pw=x`` is, and is no name a field is given).
_MIN_SECRET_KEY = 10


def _redact_key(key: str) -> str:
    """A field's name of ``_MIN_SECRET_KEY`` characters or more, redacted as a text (a map keyed
    by tokens, ``{"sk-…": {…}}``); two names redacted alike are then one field."""
    if len(key) <= _MEMO_MAX_KEY and not to_client():  # names repeat: remembered
        return _redact_short_key(key)
    return redact_text(key)


_MEMO_MAX_KEY = 128
_redact_short_key = functools.lru_cache(maxsize=8192)(redact_text)


def redact_value(value: Any) -> Any:
    """``redact`` under the name the rules use for a value that is not a request body."""
    return redact(value)


def holds_secret(text: str) -> bool:
    """Whether ``text`` holds something the redactor would replace."""
    return redact_text(text) != text
