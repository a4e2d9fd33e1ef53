"""Where ``ctxproxy`` keeps the compiled references lexicons (``rules.entities.lexicon_cache``)
and the tokenizers' merge tables (``proxy.kept_encodings``) between runs: ``$CTXPROXY_CACHE_DIR``,
else ``$XDG_CACHE_HOME/ctxproxy``, else ``~/.cache/ctxproxy``; set empty, nowhere.

A kept copy is unpickled, and its regexes are re's code, which re does not fully check: only a
file this user alone (or root) could have written is read: the folder and the file owned by this
user or by root, neither writable by the group or others, opened without following a link (the
folder held open while its file is read, so it cannot be swapped under the checks). Anything
else, or any error, is a miss: made again as without it. The image builds its copy as root into
a folder its server's user cannot write (``Dockerfile``), so a process able to write as that user
cannot plant code the server would run at its next start."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

PREFIX = "lexicons-"
MAX_BYTES = 64 << 20  # a kept copy is ~1.5 MiB; anything far larger is no copy of ours
KEPT = 8  # copies kept (other configs' extra packs, other versions); the oldest go


def default_dir(environ: Mapping[str, str]) -> Path | None:
    if "CTXPROXY_CACHE_DIR" in environ:
        chosen = environ["CTXPROXY_CACHE_DIR"].strip()
        return Path(chosen) if chosen else None
    base = environ.get("XDG_CACHE_HOME", "").strip()
    if base and Path(base).is_absolute():
        return Path(base) / "ctxproxy"
    home = environ.get("HOME", "").strip()
    return Path(home) / ".cache" / "ctxproxy" if home else None


def _private(info: os.stat_result) -> bool:
    """Owned by this user or by root, and writable by no one else."""
    owner_ok = info.st_uid in (os.geteuid(), 0)
    return owner_ok and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


class DirShelf:
    """``rules.entities.lexicon_cache.Shelf`` on a private folder."""

    def __init__(self, folder: Path, prefix: str = PREFIX) -> None:
        self.folder, self.prefix = folder, prefix  # its files' names: prefix + key

    @contextlib.contextmanager
    def _opened(self) -> Iterator[int]:
        """The folder, held open, when it is a private folder (not a link); else OSError."""
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            info = os.fstat(fd)
            if not stat.S_ISDIR(info.st_mode) or not _private(info):
                raise PermissionError(f"{self.folder}: not a private folder")
            yield fd
        finally:
            os.close(fd)

    def read(self, key: str) -> bytes | None:
        try:
            with self._opened() as folder:
                # not blocking: a pipe under its name would wait for a writer (checked below)
                flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                fd = os.open(f"{self.prefix}{key}", flags, dir_fd=folder)
                with os.fdopen(fd, "rb") as file:
                    info = os.fstat(file.fileno())
                    if not stat.S_ISREG(info.st_mode) or not _private(info):
                        return None
                    if info.st_size > MAX_BYTES:
                        return None
                    return file.read(MAX_BYTES + 1)
        except OSError:
            return None

    def write(self, key: str, data: bytes) -> None:
        with contextlib.suppress(OSError):
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with self._opened():  # written only where it would be read
                fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=self.folder)  # mode 0600
                try:
                    with os.fdopen(fd, "wb") as file:
                        file.write(data)
                    os.replace(temp, self.folder / f"{self.prefix}{key}")
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(temp)
                    raise
                self._trim()

    def _trim(self) -> None:
        """Only the ``KEPT`` newest copies of this prefix stay: one for each recent key."""
        copies = sorted(self.folder.glob(f"{self.prefix}*"), key=_mtime, reverse=True)
        for old in copies[KEPT:]:
            with contextlib.suppress(OSError):
                old.unlink()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def install(environ: Mapping[str, str]) -> None:
    """Keep the lexicons and the tokenizers' tables in this user's cache folder
    (``default_dir``), from now on."""
    from proxy import kept_encodings
    from rules.entities import lexicon_cache

    folder = default_dir(environ)
    lexicon_cache.use(DirShelf(folder) if folder is not None else None)
    kept_encodings.use(DirShelf(folder, kept_encodings.PREFIX) if folder is not None else None)


def main() -> None:
    """``python -m proxy.lexicon_shelf``: compile the built-in lexicons and the tokenizers'
    tables into the cache folder now (an image's build step), so that no start builds them."""
    from proxy.tokens import TokenCounters
    from rules.entities.ref_lexicon import load_lexicons

    install(os.environ)
    load_lexicons()
    TokenCounters().preload()


if __name__ == "__main__":
    main()
