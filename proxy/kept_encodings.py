"""The tokenizers' tables kept between runs (``proxy.lexicon_shelf``): building an encoding
decodes its merge table from base64, line by line (~0.17 s for o200k_base, ~0.07 for
cl100k_base, on every start and every ``ctxproxy rewrite``); a kept copy of the encoding's
arguments is read back in a fraction of that. The copy is keyed by tiktoken's version (whose
constructors check the table's hash), the encoding's name and the Python; it holds strings,
bytes and numbers only: its unpickler builds no object of any class."""

from __future__ import annotations

import contextlib
import hashlib
import io
import pickle
import sys
import zlib
from typing import Any, Protocol

from rules.entities.lexicon_cache import inflated

PREFIX = "encoding-"
FORMAT = b"ctxproxy-encoding-1"


class Shelf(Protocol):
    def read(self, key: str) -> bytes | None: ...

    def write(self, key: str, data: bytes) -> None: ...


_SHELF: list[Shelf] = []  # the shelf in use (``use``): none, nothing kept


def use(shelf: Shelf | None) -> None:
    _SHELF[:] = [shelf] if shelf is not None else []


def encoding(name: str) -> Any:
    """``tiktoken.get_encoding(name)``, its table read from the shelf when kept there (the
    OpenAI encodings; any other is tiktoken's own)."""
    import tiktoken

    constructor = _constructor(name)
    if not _SHELF or constructor is None or name in _known():
        return tiktoken.get_encoding(name)
    shelf = _SHELF[0]
    key = hashlib.sha256(f"{tiktoken.__version__}\x00{name}\x00{sys.version}".encode()).hexdigest()
    data = shelf.read(key)
    if data is not None:
        with contextlib.suppress(Exception):  # corrupt, another format: built again
            return _registered(name, tiktoken.Encoding(**_load(data)))
    arguments = constructor()
    made = tiktoken.Encoding(**arguments)
    with contextlib.suppress(Exception):
        shelf.write(key, FORMAT + b"\x00" + zlib.compress(pickle.dumps(arguments, protocol=5), 1))
    return _registered(name, made)


def _registered(name: str, made: Any) -> Any:
    """The encoding tiktoken's ``get_encoding`` answers with from now on (litellm's, imported
    later, too): the one built here, not a second copy of its table."""
    return _known().setdefault(name, made)


def _known() -> dict[str, Any]:
    """tiktoken's encodings built so far (a dict of its own where it keeps none)."""
    import tiktoken.registry

    known = getattr(tiktoken.registry, "ENCODINGS", None)
    return known if isinstance(known, dict) else {}


def _constructor(name: str) -> Any:
    """The function tiktoken builds ``name``'s arguments with, for the OpenAI encodings."""
    try:
        from tiktoken_ext import openai_public  # type: ignore[import-untyped]  # no py.typed
    except ImportError:
        return None
    if name not in getattr(openai_public, "ENCODING_CONSTRUCTORS", {}):
        return None
    return openai_public.ENCODING_CONSTRUCTORS[name]


class _Plain(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: an encoding's arguments hold no objects")


def _load(data: bytes) -> dict[str, Any]:
    head, _, body = data.partition(b"\x00")
    if head != FORMAT:
        raise ValueError("not an encoding copy of this format")
    arguments = _Plain(io.BytesIO(inflated(body))).load()
    if not isinstance(arguments, dict) or not isinstance(arguments.get("mergeable_ranks"), dict):
        raise ValueError("not an encoding's arguments")
    return arguments
