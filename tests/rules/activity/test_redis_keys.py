"""The keys a redis-cli command line set, deleted or renamed."""

from __future__ import annotations

import pytest

from rules.activity.redis_keys import redis_made


def _made(line: str, output: str = "OK") -> list[tuple[str, str, str]]:
    return [(m.action, m.id, m.source) for m in redis_made(line.split(), output, line)]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("redis-cli SET feature:flag on", [("create", "feature:flag", "")]),
        ("redis-cli -n 2 -h cache.local -p 6380 set session:debug 1 EX 3600",
         [("create", "session:debug", "")]),
        ("redis-cli --user app --pass pw HSET user:7 name ada", [("create", "user:7", "")]),
        ("redis-cli --tls -c LPUSH jobs:pending 1", [("create", "jobs:pending", "")]),
        # options that take no value (--askpass asks on the terminal)
        ("redis-cli --askpass SET cache:home 1", [("create", "cache:home", "")]),
        ("redis-cli MSET a 1 b 2", [("create", "a", ""), ("create", "b", "")]),
        ("redis-cli DEL a b", [("delete", "a", ""), ("delete", "b", "")]),
        ("redis-cli UNLINK cache:home", [("delete", "cache:home", "")]),
        ("redis-cli RENAME old:key new:key", [("move", "new:key", "redis_key:old:key")]),
        ("redis-cli EXPIRE temp:x 60", [("modify", "temp:x", "")]),
        # read, no command, or a command without its key: nothing
        ("redis-cli GET feature:flag", []),
        ("redis-cli KEYS *", []),
        ("redis-cli -n 2", []),
        ("redis-cli SET", []),
        ("redis-cli -a", []),
    ],
)  # fmt: skip
def test_the_keys_a_command_line_set_deleted_or_renamed(
    line: str, expected: list[tuple[str, str, str]]
) -> None:
    assert _made(line) == expected


@pytest.mark.parametrize(
    "output",
    [
        "(error) WRONGTYPE Operation against a key holding the wrong kind of value",
        "ERR wrong number of arguments for 'set' command",
        "NOAUTH Authentication required.",
        "Could not connect to Redis at 127.0.0.1:6379: Connection refused",
    ],
)
def test_a_command_redis_refused_made_nothing(output: str) -> None:
    assert _made("redis-cli SET feature:flag on", output) == []


@pytest.mark.parametrize(
    ("line", "output"),
    [
        ("redis-cli SET lock:deploy 1 NX", "(nil)"),
        ("redis-cli SETNX lock:deploy 1", "(integer) 0"),
        ("redis-cli RENAMENX tmp:import users:prod", "0"),
        ("redis-cli SET cache:home 1", "READONLY You can't write against a read only replica."),
        ("redis-cli SET cache:home 1", "MOVED 3999 127.0.0.1:6381"),
        ("redis-cli -a pw SET cache:home 1",
         "Warning: Using a password with '-a' or '-u' option on the command line interface may "
         "not be safe.\nNOPERM this user has no permissions to run the 'set' command"),
    ],
)  # fmt: skip
def test_a_write_redis_did_not_make_made_nothing(line: str, output: str) -> None:
    assert _made(line, output) == []


def test_a_write_after_the_password_warning_counts() -> None:
    output = "Warning: Using a password with '-a' or '-u' option on the command line interface.\nOK"
    assert _made("redis-cli -a pw SET cache:home 1", output) == [("create", "cache:home", "")]


def test_a_key_too_long_or_empty_is_not_kept_nor_replaced_by_the_next_word() -> None:
    assert _made(f"redis-cli SET {'k' * 210} 42") == []
    assert list(redis_made(["redis-cli", "SET", "", "1"], "OK", "")) == []
    assert _made(f"redis-cli DEL a {'k' * 210} b") == [("delete", "a", ""), ("delete", "b", "")]
