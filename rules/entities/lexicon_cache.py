"""The references lexicons kept between runs: compiling them (hundreds of long word alternations)
costs ~2 s of CPU, on every start of the server and every ``ctxproxy rewrite``; read back they
cost ~0.05 s. Where the bytes are kept is the caller's (a ``Shelf``: the proxy's is a per-user
folder, ``proxy.lexicon_shelf``); without one, nothing is kept.

A copy is keyed by everything its value is made of: the packs' bytes (the built-in one and each
extra file, in their order; not where they are), the sources of the modules that compile them,
and the Python that compiled its regexes (re's code is its build's). Its regexes are kept as re's
compiled code (``regex_literals.recording``), so reading one back parses and compiles nothing;
the unpickler builds only the lexicon's own classes and these regexes."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import pickle
import re
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from rules.regex_literals import Code, recording

_sre: Any = importlib.import_module("_sre")
FORMAT = b"ctxproxy-lexicons-1"
# a copy inflated is ~8 MiB (an encoding's ~3): a file this far over it is no copy of ours (and
# zlib inflates ~1,000 times, so its 64 MiB on disk could have asked for 64 GiB)
MAX_INFLATED = 256 << 20
T = TypeVar("T")


class Shelf(Protocol):
    """Bytes kept under a key between runs; any failure is a miss (read) or nothing (write)."""

    def read(self, key: str) -> bytes | None: ...

    def write(self, key: str, data: bytes) -> None: ...


_SHELF: list[Shelf] = []  # the shelf in use (``use``): none, nothing read or kept


def use(shelf: Shelf | None) -> None:
    """Keep compiled lexicons on ``shelf`` from now on (None: nowhere)."""
    _SHELF[:] = [shelf] if shelf is not None else []


def in_use() -> bool:
    return bool(_SHELF)


def key_of(sources: Iterable[Path], packs: Iterable[Path]) -> str | None:
    """The key of a value compiled by ``sources`` from ``packs``; None when a pack cannot be read
    (compiling says why)."""
    digest = hashlib.sha256(FORMAT)
    for part in (sys.version, sys.implementation.cache_tag or "", _sre.MAGIC, _sre.CODESIZE):
        digest.update(f"{part}\x00".encode())
    try:
        for path in [*sources, Path(__file__)]:
            digest.update(b"source\x00" + path.read_bytes() + b"\x00")
        for at, path in enumerate(packs):  # by place and bytes, not path: an image compiles
            # them where it builds (/app), its server reads them from site-packages
            digest.update(f"pack\x00{at}\x00".encode() + path.read_bytes() + b"\x00")
    except OSError:
        return None
    return digest.hexdigest()


def cached(key: str | None, compute: Callable[[], T], classes: Mapping[str, type]) -> T:
    """``compute()``, or the copy kept under ``key`` (``classes``: the value's own classes, the
    only ones a kept copy may build). A copy unreadable for any reason is compiled again. A user
    pack's patterns passed the regex budget (``rules.packs.compile_regex``) when the copy was
    made: the same bytes are not timed again."""
    shelf = _SHELF[0] if _SHELF and key is not None else None
    if shelf is None or key is None:
        return compute()
    data = shelf.read(key)
    if data is not None:
        with contextlib.suppress(Exception):  # corrupt, truncated, another format: compiled
            return _load(data, classes)  # type: ignore[no-any-return]
    with recording() as codes:
        value = compute()
    with contextlib.suppress(Exception):  # a value that cannot be kept is only not kept
        shelf.write(key, _dump(value, codes))
    return value


def _regex(source: str, flags: int, code: bytes, groups: int, index: dict[str, int],
           names: tuple[str | None, ...]) -> re.Pattern[str]:  # fmt: skip
    """A regex from re's code for it, as ``regex_literals.compile_once`` made it."""
    words = array("I")
    words.frombytes(code)
    return _sre.compile(source, flags, words.tolist(), groups, index, names)  # type: ignore[no-any-return]


def _plain(source: str, flags: int) -> re.Pattern[str]:
    """A regex compiled without ``compile_once``: compiled again when read."""
    return re.compile(source, flags)


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, codes: Mapping[tuple[str, int], Code]) -> None:
        super().__init__(file, protocol=5)
        self.codes = codes

    def reducer_override(self, obj: Any) -> Any:
        if not isinstance(obj, re.Pattern):
            return NotImplemented
        code = self.codes.get((obj.pattern, obj.flags))
        if code is None or not isinstance(obj.pattern, str):
            return _plain, (obj.pattern, obj.flags)
        words, groups, index, names = code
        return _regex, (obj.pattern, obj.flags, array("I", words).tobytes(), groups, index, names)


class _Unpickler(pickle.Unpickler):
    """Builds nothing but the value's own classes and its regexes."""

    def __init__(self, file: io.BytesIO, classes: Mapping[str, type]) -> None:
        super().__init__(file)
        self.classes = {(cls.__module__, cls.__qualname__): cls for cls in classes.values()}
        self.classes[(__name__, "_regex")] = _regex  # type: ignore[assignment]
        self.classes[(__name__, "_plain")] = _plain  # type: ignore[assignment]

    def find_class(self, module: str, name: str) -> Any:
        found = self.classes.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not part of a lexicon")
        return found


def _dump(value: Any, codes: Mapping[tuple[str, int], Code]) -> bytes:
    out = io.BytesIO()
    _Pickler(out, codes).dump(value)
    return FORMAT + b"\x00" + zlib.compress(out.getvalue(), 1)


def _load(data: bytes, classes: Mapping[str, type]) -> Any:
    head, _, body = data.partition(b"\x00")
    if head != FORMAT:
        raise ValueError("not a lexicon copy of this format")
    return _Unpickler(io.BytesIO(inflated(body)), classes).load()


def inflated(body: bytes) -> bytes:
    """``zlib.decompress(body)``, at most ``MAX_INFLATED`` bytes of it (else ValueError)."""
    inflate = zlib.decompressobj()
    out = inflate.decompress(body, MAX_INFLATED)
    if inflate.unconsumed_tail or not inflate.eof:
        raise ValueError("a kept copy larger than any of ours, or truncated")
    return out
