"""Read-only access to the configured workspace root, and nothing outside it: a path is used only
when its real path (symlinks resolved) is under the root's real path; a file is opened without
following a last symlink (``O_NOFOLLOW``) nor blocking (a FIFO), must be a regular file, and is
read up to a size; text only (a NUL byte or bytes that are not UTF-8 make it binary). Secrets
files (``.env*``, keys, credentials) are never opened, nor listed."""

from __future__ import annotations

import fnmatch
import os
import stat
from dataclasses import dataclass

# names of files never read nor listed: environment files, private keys, credentials
SECRET_PATTERNS = (
    ".env", ".env.*", "*.env", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks",
    "*.keystore", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", ".npmrc",
    ".pypirc", ".git-credentials", "credentials", "credentials.*", "*credentials*.json",
    "secrets", "secrets.*", "*.secret", "*.secrets", "service-account*.json", ".htpasswd",
)  # fmt: skip
SECRET_FOLDERS = frozenset({".ssh", ".aws", ".gnupg", ".docker", ".kube"})


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return lowered in SECRET_FOLDERS or any(
        fnmatch.fnmatchcase(lowered, p) for p in SECRET_PATTERNS
    )


@dataclass(frozen=True)
class ReadOutcome:
    text: str | None  # None: not read (see ``why``)
    why: str = ""  # outside | secret | not a file | binary | missing | too large (cut)


class Root:
    """The workspace root, resolved once; every path handed out is checked against it."""

    def __init__(self, root: str) -> None:
        self.given = root
        self.real = os.path.realpath(root)

    def exists(self) -> bool:
        return os.path.isdir(self.real)

    def inside(self, path: str) -> str | None:
        """``path``'s real path when it is the root or under it, else None."""
        real = os.path.realpath(path)
        if real == self.real or real.startswith(self.real.rstrip(os.sep) + os.sep):
            return real
        return None

    def relative(self, path: str) -> str:
        return os.path.relpath(path, self.real)

    def read_text(self, rel: str, max_bytes: int) -> ReadOutcome:
        """The text of file ``rel`` (under the root), up to ``max_bytes``."""
        path = os.path.join(self.real, rel)
        if any(is_secret_name(part) for part in rel.split(os.sep)):
            return ReadOutcome(None, "secret")
        real = self.inside(path)
        if real is None:
            return ReadOutcome(None, "outside")
        if is_secret_name(os.path.basename(real)):
            return ReadOutcome(None, "secret")  # a harmless name linking to a secrets file
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return ReadOutcome(None, "missing")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return ReadOutcome(None, "not a file")
            data = os.read(fd, max_bytes + 1)
        except OSError:
            return ReadOutcome(None, "missing")
        finally:
            os.close(fd)
        cut = len(data) > max_bytes
        data = data[:max_bytes]
        if b"\0" in data:
            return ReadOutcome(None, "binary")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not cut or exc.start < len(data) - 4:  # only a character cut at the end is fine
                return ReadOutcome(None, "binary")
            text = data[: exc.start].decode("utf-8")
        return ReadOutcome(text, "too large (cut)" if cut else "")


@dataclass
class Listing:
    """The top of the tree: ``entries`` as root-relative paths (folders end with ``/``)."""

    entries: list[str]
    left_out: dict[str, int]


class Ignore:
    """The root's ``.gitignore``, simply: name and path globs, folder patterns (``name/``),
    negations ignored (a file is at worst left out of the picture). At most 500 patterns."""

    ALWAYS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache", ".idea", "dist",
                        "target", ".next", ".gradle", "obj", ".cache"})  # fmt: skip

    def __init__(self, text: str | None) -> None:
        self.names: list[str] = []
        self.folders: list[str] = []
        self.paths: list[str] = []
        for line in (text or "").splitlines()[:500]:
            line = line.strip()
            if not line or line.startswith(("#", "!")) or len(line) > 200:
                continue
            folder = line.endswith("/")
            line = line.strip("/")
            if "/" in line:
                self.paths.append(line)
            elif folder:
                self.folders.append(line)
            else:
                self.names.append(line)

    def ignored(self, rel: str, is_dir: bool) -> bool:
        name = os.path.basename(rel)
        if name in self.ALWAYS and is_dir:
            return True
        if any(fnmatch.fnmatchcase(name, p) for p in self.names):
            return True
        if is_dir and any(fnmatch.fnmatchcase(name, p) for p in self.folders):
            return True
        return any(fnmatch.fnmatchcase(rel, p) for p in self.paths)


def list_top(root: Root, ignore: Ignore, max_depth: int, max_entries: int, max_scanned: int,
             expired: object) -> Listing:  # fmt: skip
    """Breadth first from the root, folders before files, names sorted; symlinks are listed
    only when they point inside the root, and never followed. ``expired()``: the time is up."""
    check = expired if callable(expired) else (lambda: False)
    entries: list[str] = []
    left = {"ignored": 0, "secrets": 0, "symlinks_out": 0, "past_bound": 0, "unscanned": 0}
    queue: list[tuple[str, int]] = [("", 0)]
    scanned = 0
    while queue:
        rel_dir, depth = queue.pop(0)
        if check():
            left["unscanned"] += len(queue) + 1
            break
        try:
            with os.scandir(os.path.join(root.real, rel_dir)) as it:
                items = []
                for entry in it:
                    scanned += 1
                    if scanned > max_scanned:
                        left["unscanned"] += 1
                        break
                    items.append(entry)
        except OSError:
            continue
        items.sort(key=lambda e: (not _is_dir(e), e.name))
        for entry in items:
            rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
            is_dir = _is_dir(entry)
            if is_secret_name(entry.name):
                left["secrets"] += 1
                continue
            if entry.is_symlink() and root.inside(entry.path) is None:
                left["symlinks_out"] += 1
                continue
            if ignore.ignored(rel, is_dir):
                left["ignored"] += 1
                continue
            if len(entries) >= max_entries:
                left["past_bound"] += 1
                continue
            entries.append(rel + "/" if is_dir else rel)
            if is_dir and not entry.is_symlink() and depth + 1 < max_depth:
                queue.append((rel, depth + 1))
        if scanned > max_scanned:
            left["unscanned"] += len(queue)
            break
    return Listing(entries, {k: v for k, v in left.items() if v})


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
