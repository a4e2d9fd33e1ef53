"""The keys ``redis-cli`` set and deleted: ``redis-cli -n 2 SET feature:new_checkout on`` makes
the key ``feature:new_checkout`` ("delete the key you set"); ``DEL`` and ``UNLINK`` end it,
``RENAME`` moves it, ``FLUSHALL`` and ``FLUSHDB`` end every one. Read for what a command made
beyond files (``entity_commands``).

Only a command given on the line counts (not one piped in, nor ``--eval`` scripts), and only
when what redis-cli printed is no error: it exits 0 on ``(error) WRONGTYPE …`` all the same. A
write made only if the key is new (``SETNX``, ``SET … NX``, ``RENAMENX``) answered 0 or nil did
nothing."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rules.activity.entity_pack import Made

KIND = "redis_key"
# redis-cli's options that take a value, skipped with it (before the command)
_VALUED = frozenset(
    {
        "-h", "-p", "-s", "-a", "-u", "-n", "-r", "-i", "-d", "-D", "-t", "--user", "--pass",
        "--cacert", "--cacertdir", "--cert", "--key", "--tls-ciphers", "--tls-ciphersuites",
        "--sni", "--pattern", "--count", "--quoted-pattern", "--eval", "--memkeys-samples",
        "--functions-rdb", "--rdb", "--pipe-timeout",
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
# commands that do nothing when the key exists (or, ``RENAMENX``, the new name does): a reply of
# 0 or nil says so
_ONLY_IF_NEW = frozenset({"setnx", "hsetnx", "msetnx", "renamenx"})
_MAX_KEYS = 20  # per command
_MAX_KEY_CHARS = 200


def redis_made(argv: Sequence[str], output: str, by: str) -> Iterator[Made]:
    """The keys ``argv`` (a redis-cli command line, its program first) set, deleted or renamed,
    given what it printed."""
    words = _command(argv)
    replies = [line.strip() for line in _reply(output).splitlines()]
    if any(_failed(line) for line in replies):
        return  # an error anywhere in the line's output: which command's is not known
    if words and words[0].lower() in ("flushall", "flushdb"):
        # every key known ends (which database each was set in is not kept: a key of another
        # one, ended too, is a pointer not given, not a wrong one)
        yield Made(KIND, "*", "delete", "", (("ends", "all"),), (), by)
        return
    if len(words) < 2:
        return
    verb, args = words[0].lower(), words[1:]
    conditional = verb in _ONLY_IF_NEW or (
        verb == "set" and any(a.lower() in ("nx", "xx") for a in args[2:])
    )
    if conditional and (
        not replies or any(r in _NOTHING_DONE for r in replies) or _DONE.isdisjoint(replies)
    ):
        return  # SET lock 1 NX answered (nil) (in any line: whose is not known): nothing set
    if verb in _WRITES:
        keys, action = args[:1], "create"
    elif verb in _MULTI_WRITES:
        keys, action = args[: 2 * _MAX_KEYS : 2], "create"
    elif verb in _DELETES:
        keys, action = args[:_MAX_KEYS] if verb != "getdel" else args[:1], "delete"
    elif verb in ("expire", "persist"):
        keys, action = args[:1], "modify"
    elif verb in _RENAMES and len(args) >= 2:
        if _named(args[0]) and _named(args[1]):
            yield Made(KIND, args[1], "move", args[1], (), (), by, f"{KIND}:{args[0]}")
        return
    else:
        return
    for key in keys:
        if _named(key):  # one too long to be a name, or empty: not kept (nor the next in its place)
            yield Made(KIND, key, action, key, (), (), by)


_NOTHING_DONE = frozenset({"(nil)", "0", "(integer) 0", "nil"})
_DONE = frozenset({"OK", "1", "(integer) 1"})  # what a conditional write that did answers


def _named(key: str) -> bool:
    return 0 < len(key) <= _MAX_KEY_CHARS


def _command(argv: Sequence[str]) -> list[str]:
    """The redis command and its arguments: the words after redis-cli's own options."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _VALUED:
            i += 1
        i += 1
    return list(argv[i:])


def _reply(output: str) -> str:
    """What redis answered: the output past redis-cli's own warning about a password given on
    the command line."""
    head = output.lstrip()[:2_000]
    if head.startswith("Warning:"):
        head = head.split("\n", 1)[1].lstrip() if "\n" in head else ""
    return head


# the replies that are errors: ``(error) …`` at a terminal, the error's code when piped
_ERRORS = (
    "(error)", "ERR", "WRONGTYPE", "NOAUTH", "NOPERM", "READONLY", "MOVED", "ASK ", "OOM",
    "MISCONF", "BUSY", "LOADING", "NOSCRIPT", "EXECABORT", "CROSSSLOT", "CLUSTERDOWN",
    "TRYAGAIN", "MASTERDOWN", "NOREPLICAS", "Could not connect", "AUTH failed",
)  # fmt: skip


def _failed(reply: str) -> bool:
    """Whether redis-cli printed an error."""
    return reply.startswith(_ERRORS)
