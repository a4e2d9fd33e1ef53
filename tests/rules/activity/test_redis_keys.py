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
