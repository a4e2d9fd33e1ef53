"""State values built from message text, made storable: lone surrogates (which JSON cannot
encode) replaced, so track_entities and working_set can keep paths and commands as sent; and
bounded: a call id (the client's to choose, of any length) is kept as at most ``MAX_ID_CHARS``
characters, a path of more than ``MAX_PATH_CHARS`` is not kept at all."""

from __future__ import annotations

import hashlib
from typing import Any, overload

import orjson

# A call id as the state keeps it: longer ones become their first characters and a digest of the
# whole (providers' ids are 24-40 characters; a client may send megabytes).
MAX_ID_CHARS = 64
# A path longer than any file system takes (Linux's PATH_MAX) is not a path worth remembering.
MAX_PATH_CHARS = 4096
# Folders on a path (no project nests 64 deep; a line of `cd d && mkdir x` nested 2,000, and
# reading each path's folders was quadratic): a deeper working directory is taken as unknown.
MAX_PATH_DEPTH = 64


def placeable(path: str) -> bool:
    """Whether ``path`` is one the rules keep: within ``MAX_PATH_CHARS`` and ``MAX_PATH_DEPTH``."""
    return len(path) <= MAX_PATH_CHARS and path.count("/") <= MAX_PATH_DEPTH


def stored_id(value: str) -> str:
    """A call id as state keeps it: itself up to ``MAX_ID_CHARS`` characters, else its first 32
    and a 64-bit digest of it (the same id always gives the same key)."""
    if len(value) <= MAX_ID_CHARS:
        return value
    digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"{value[:32]}~{digest}"


@overload
def storable(value: dict[str, Any]) -> dict[str, Any]: ...


@overload
def storable(value: list[Any]) -> list[Any]: ...


def storable(value: Any) -> Any:
    """``value`` (JSON-like) with lone surrogates (``"\\udcff"``) in its strings replaced by
    "?", so state holding text from messages can be stored; ``value`` itself when it has none."""
    try:
        orjson.dumps(value)
        return value
    except TypeError:
        return _replace_surrogates(value)


def _replace_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace_surrogates(v) for v in value]
    return value
