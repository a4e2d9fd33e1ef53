"""The compiled references lexicons are kept between runs in the user's cache folder: a second
start reads them back (the same regexes, code and all) instead of compiling ~2 s; a copy another
user could have written, a corrupt one, or one holding anything but a lexicon is never used."""

from __future__ import annotations

import os
import pickle
import re
import stat
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from proxy import kept_encodings, lexicon_shelf
from proxy.lexicon_shelf import PREFIX, DirShelf, default_dir
from rules.entities import lexicon_cache, ref_lexicon
from rules.regex_literals import compile_once


@pytest.fixture
def shelf(tmp_path: Path) -> Iterator[DirShelf]:
    kept = DirShelf(tmp_path / "cache")
    lexicon_cache.use(kept)
    ref_lexicon.load_lexicons.cache_clear()
    yield kept
    lexicon_cache.use(None)
    ref_lexicon.load_lexicons.cache_clear()


def _refused(*_: object) -> object:
    raise AssertionError("compiled again")


def test_a_second_run_reads_the_lexicons_back_not_compiling_them(
    shelf: DirShelf, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = ref_lexicon.load_lexicons()
    (kept,) = shelf.folder.iterdir()
    assert kept.stat().st_mode & 0o777 == 0o600 and shelf.folder.stat().st_mode & 0o777 == 0o700
    ref_lexicon.load_lexicons.cache_clear()
    monkeypatch.setattr(ref_lexicon, "_compile", _refused)
    read = ref_lexicon.load_lexicons()
    assert read == compiled  # a regex equals another of the same source, flags and code
    english = read[1][0].patterns[0].regex
    assert english.groupindex == compiled[1][0].patterns[0].regex.groupindex


def _value() -> tuple[str, re.Pattern[str]]:
    return ("v", compile_once(r"(?P<a>x)y++", re.M))


def _keep_one(shelf: DirShelf) -> Path:
    assert lexicon_cache.cached("k", _value, {}) == _value()
    return shelf.folder / f"{PREFIX}k"


def test_only_a_copy_this_user_alone_could_write_is_read(shelf: DirShelf) -> None:
    kept = _keep_one(shelf)
    assert lexicon_cache.cached("k", _refused, {}) == _value()  # type: ignore[arg-type]
    kept.chmod(0o620)  # the group may write it: never read
    assert shelf.read("k") is None
    kept.chmod(0o600)
    shelf.folder.chmod(0o777)  # anyone may swap it
    assert shelf.read("k") is None
    shelf.folder.chmod(0o700)
    link = shelf.folder / f"{PREFIX}link"
    link.symlink_to(kept)
    assert shelf.read("link") is None and shelf.read("k") is not None
    moved = shelf.folder.parent / "moved"
    shelf.folder.rename(moved)
    shelf.folder.symlink_to(moved)  # the folder itself a link
    assert shelf.read("k") is None


def test_a_copy_is_trusted_from_this_user_or_root_and_writable_by_none_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lexicon_shelf.os, "geteuid", lambda: 10001)  # the image's server user

    def info(uid: int, mode: int) -> os.stat_result:
        return os.stat_result((stat.S_IFREG | mode, 0, 0, 1, uid, 0, 0, 0, 0, 0))

    assert lexicon_shelf._private(info(10001, 0o600))
    assert lexicon_shelf._private(info(0, 0o644))  # the image's copy, built as root
    assert not lexicon_shelf._private(info(0, 0o664))  # root's, but its group may write it
    assert not lexicon_shelf._private(info(10002, 0o600))  # another user's


def test_the_image_builds_its_copy_where_its_server_cannot_write() -> None:
    """The image's copy is made as root into a folder its server's user reads and cannot write,
    the folder its server reads (a copy holds regex code: no process of that user may plant
    one)."""
    text = (Path(__file__).parents[2] / "Dockerfile").read_text()
    user_at = text.index("\nUSER ctxproxy")
    folder = re.search(r"^ENV CTXPROXY_CACHE_DIR=(\S+)$", text, re.M)
    assert folder is not None and folder.start() < user_at
    build = text.index(f"CTXPROXY_CACHE_DIR={folder[1]} python -m proxy.lexicon_shelf")
    assert build < user_at  # as root
    assert f"chmod -R a+rX,go-w {folder[1]}" in text[build:user_at]
    assert "lexicon_shelf" not in text[user_at:]


def test_a_corrupt_or_foreign_copy_is_compiled_again(shelf: DirShelf) -> None:
    kept = _keep_one(shelf)
    kept.write_bytes(kept.read_bytes()[:-20])
    assert lexicon_cache.cached("k", _value, {}) == _value()
    payload = pickle.dumps(os.getcwd, protocol=5)  # builds something no lexicon holds
    kept.write_bytes(lexicon_cache.FORMAT + b"\x00" + zlib.compress(payload))
    with pytest.raises(Exception, match="not part of a lexicon"):
        lexicon_cache._load(kept.read_bytes(), {})
    assert lexicon_cache.cached("k", _value, {}) == _value()


def test_the_key_is_the_packs_and_the_code(tmp_path: Path) -> None:
    source, pack = tmp_path / "m.py", tmp_path / "p.yaml"
    source.write_text("x = 1\n")
    pack.write_text("references: {}\n")
    first = lexicon_cache.key_of([source], [pack])
    pack.write_text("references: {kinds: {}}\n")
    second = lexicon_cache.key_of([source], [pack])
    source.write_text("x = 2\n")
    assert len({first, second, lexicon_cache.key_of([source], [pack])}) == 3
    assert lexicon_cache.key_of([source], [tmp_path / "missing.yaml"]) is None


def test_the_key_is_the_same_wherever_the_code_and_packs_are_installed(tmp_path: Path) -> None:
    """The image compiles them from its build folder (``python -m proxy.lexicon_shelf`` in
    /app), the server runs from site-packages: the same bytes, the same key."""
    copies = []
    for folder in (tmp_path / "app", tmp_path / "site-packages"):
        folder.mkdir()
        (folder / "m.py").write_text("x = 1\n")
        (folder / "references.yaml").write_text("references: {}\n")
        copies.append(lexicon_cache.key_of([folder / "m.py"], [folder / "references.yaml"]))
    assert copies[0] is not None and copies[0] == copies[1]


def test_the_folder_is_the_users_cache_unless_set() -> None:
    assert default_dir({"HOME": "/h"}) == Path("/h/.cache/ctxproxy")
    assert default_dir({"HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path("/x/ctxproxy")
    assert default_dir({"HOME": "/h", "CTXPROXY_CACHE_DIR": "/c"}) == Path("/c")
    assert default_dir({"HOME": "/h", "CTXPROXY_CACHE_DIR": ""}) is None  # kept nowhere


def test_an_image_build_compiles_them_into_the_cache_folder(tmp_path: Path) -> None:
    # its own process, as the image's build runs it: in this one the tokenizers may be built
    # already (by earlier tests), and a table built is not kept again
    env = {**os.environ, "CTXPROXY_CACHE_DIR": str(tmp_path / "c")}
    subprocess.run(
        [sys.executable, "-m", "proxy.lexicon_shelf"], env=env, check=True, timeout=120
    )
    kept = sorted(p.name.split("-")[0] for p in (tmp_path / "c").iterdir())
    assert kept == ["encoding", "encoding", "lexicons"]


def test_a_tokenizers_table_is_kept_and_counts_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken
    from tiktoken_ext import openai_public

    own = tiktoken.Encoding(**openai_public.cl100k_base())  # built from its base64
    monkeypatch.delitem(tiktoken.registry.ENCODINGS, "cl100k_base", raising=False)
    kept_encodings.use(DirShelf(tmp_path, kept_encodings.PREFIX))
    try:
        made = kept_encodings.encoding("cl100k_base")
        (copy,) = tmp_path.iterdir()
        assert copy.name.startswith(kept_encodings.PREFIX) and copy.stat().st_mode & 0o077 == 0
        monkeypatch.setitem(openai_public.ENCODING_CONSTRUCTORS, "cl100k_base", _refused)
        del tiktoken.registry.ENCODINGS["cl100k_base"]  # as in the next process
        read = kept_encodings.encoding("cl100k_base")  # not built from its base64 again
    finally:
        kept_encodings.use(None)
    text = "Löschen Sie den Ordner 'build/' — 删除刚创建的文件夹 <|endoftext|>"
    assert read.encode_ordinary(text) == made.encode_ordinary(text) == own.encode_ordinary(text)
    assert read.encode(text, allowed_special="all") == own.encode(text, allowed_special="all")
    assert read.n_vocab == own.n_vocab
    assert tiktoken.get_encoding("cl100k_base") is read  # one table in the process
    copy.write_bytes(kept_encodings.FORMAT + b"\x00" + zlib.compress(pickle.dumps(os.getcwd)))
    with pytest.raises(pickle.UnpicklingError):
        kept_encodings._load(copy.read_bytes())


def test_a_recording_inside_another_ends_alone() -> None:
    from rules import regex_literals

    with regex_literals.recording() as outer:
        with regex_literals.recording() as inner:
            assert inner == outer == {}  # equal, not the same
        compile_once("recorded")
    assert list(outer) == [("recorded", re.UNICODE)] and not inner
    assert regex_literals._RECORDS == []  # nothing records any more


def test_a_copy_that_inflates_past_its_bound_is_not_read(
    shelf: DirShelf, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept copy is at most ``MAX_BYTES`` compressed, which a crafted one inflates ~1,000
    times (64 GiB): it is read only up to its bound, then compiled again."""
    monkeypatch.setattr(lexicon_cache, "MAX_INFLATED", 1 << 20)
    body = b"\x00" + zlib.compress(bytes(64 << 20), 9)
    assert _refused_within(8 << 20, lexicon_cache._load, lexicon_cache.FORMAT + body, {})
    assert _refused_within(8 << 20, kept_encodings._load, kept_encodings.FORMAT + body)


def _refused_within(limit: int, load: Callable[..., object], *args: object) -> bool:
    """Whether ``load(*args)`` raises ValueError having held under ``limit`` bytes at most."""
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ValueError):
            load(*args)
        return tracemalloc.get_traced_memory()[1] < limit
    finally:
        tracemalloc.stop()


def test_a_copy_that_is_no_file_is_not_waited_on(shelf: DirShelf) -> None:
    """A pipe under a copy's name: opening it to read would wait for a writer for ever (the
    server's start held); it is no copy, so compiled again."""
    import subprocess
    import sys

    kept = _keep_one(shelf)
    kept.unlink()
    os.mkfifo(kept, 0o600)
    probe = "from proxy.lexicon_shelf import DirShelf\n"
    probe += f"print(DirShelf(__import__('pathlib').Path({str(shelf.folder)!r})).read('k'))"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", probe], env=env, timeout=10, capture_output=True)
    assert done.stdout.strip() == b"None"
