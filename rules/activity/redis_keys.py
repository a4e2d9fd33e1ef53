"""The keys ``redis-cli`` set and deleted: ``redis-cli -n 2 SET feature:new_checkout on`` makes
the key ``feature:new_checkout`` ("delete the key you set"); ``DEL`` and ``UNLINK`` end it,
``RENAME`` moves it. Read for what a command made beyond files (``entity_commands``).

Only a command given on the line counts (not one piped in, nor ``--eval`` scripts), and only
when what redis-cli printed is no error: it exits 0 on ``(error) WRONGTYPE …`` all the same."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rules.activity.entity_pack import Made

KIND = "redis_key"
# redis-cli's options that take a value, skipped with it (before the command)
_VALUED = frozenset(
    {
        "-h", "-p", "-s", "-a", "-u", "-n", "-r", "-i", "-d", "-D", "-t", "--user", "--pass",
        "--askpass", "--cacert", "--cacertdir", "--cert", "--key", "--tls-ciphers",
        "--tls-ciphersuites", "--sni", "--pattern", "--count", "--quoted-pattern", "--eval",
        "--memkeys-samples", "--hotkeys", "--functions-rdb", "--rdb", "--replica", "--pipe-timeout",
    }
)  # fmt: skip
# a command that writes its first argument, a key (made when it did not exist, changed when it
# did: either way the agent set it)
_WRITES = frozenset(
    {
        "set", "setnx", "setex", "psetex", "getset", "append", "incr", "incrby", "incrbyfloat",
        "decr", "decrby", "hset", "hsetnx", "hmset", "hincrby", "hincrbyfloat", "lpush", "rpush",
        "lpushx", "rpushx", "lset", "linsert", "sadd", "zadd", "zincrby", "xadd", "pfadd",
        "setbit", "setrange", "geoadd", "json.set", "bf.add",
    }
)  # fmt: skip
_MULTI_WRITES = frozenset({"mset", "msetnx"})  # key value key value …
_DELETES = frozenset({"del", "unlink", "getdel"})  # every argument a key (getdel: one)
_RENAMES = frozenset({"rename", "renamenx"})
_MAX_KEYS = 20  # per command
_MAX_KEY_CHARS = 200


def redis_made(argv: Sequence[str], output: str, by: str) -> Iterator[Made]:
    """The keys ``argv`` (a redis-cli command line, its program first) set, deleted or renamed,
    given what it printed."""
    words = _command(argv)
    if len(words) < 2 or _failed(output):
        return
    verb, args = words[0].lower(), [w for w in words[1:] if len(w) <= _MAX_KEY_CHARS]
    if not args:
        return
    if verb in _WRITES:
        yield Made(KIND, args[0], "create", args[0], (), (), by)
    elif verb in _MULTI_WRITES:
        for key in args[: 2 * _MAX_KEYS : 2]:
            yield Made(KIND, key, "create", key, (), (), by)
    elif verb in _DELETES:
        for key in args[:_MAX_KEYS] if verb != "getdel" else args[:1]:
            yield Made(KIND, key, "delete", key, (), (), by)
    elif verb in _RENAMES and len(args) >= 2:
        yield Made(KIND, args[1], "move", args[1], (), (), by, f"{KIND}:{args[0]}")
    elif verb == "expire" or verb == "persist":
        yield Made(KIND, args[0], "modify", args[0], (), (), by)


def _command(argv: Sequence[str]) -> list[str]:
    """The redis command and its arguments: the words after redis-cli's own options."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _VALUED:
            i += 1
        i += 1
    return list(argv[i:])


def _failed(output: str) -> bool:
    """Whether redis-cli printed an error (``(error) ERR …`` at a terminal, ``ERR …`` piped)."""
    head = output.lstrip()[:200]
    return head.startswith(("(error)", "ERR ", "WRONGTYPE", "NOAUTH", "Could not connect"))
