"""A database's sequences, triggers and routines (functions, procedures) a SQL client made: made
and ended by their statements, ended with their database, named by their nouns."""

from __future__ import annotations

from typing import Any

from tests.support.scenarios import Scenario, run


def _sc(steps: list[dict[str, Any]], ask: str, expect: dict[str, Any]) -> Scenario:
    return Scenario("t", "en", "non_file", "/home/dev/app", tuple(steps), ask, expect)


PROC = {
    "shell": 'psql -d shop -c "CREATE PROCEDURE archive_orders() LANGUAGE sql AS \\$\\$ DELETE'
    ' FROM orders WHERE created_at < now() - interval \'1 year\' \\$\\$"',
    "output": "CREATE PROCEDURE",
}


def test_a_stored_procedure_is_named_by_its_noun() -> None:
    sc = _sc([PROC], "drop the stored procedure you just created",
             {"kind": "routine", "id": "archive_orders"})  # fmt: skip
    assert run(sc).passed


def test_a_dropped_procedure_is_no_longer_there() -> None:
    drop = {"shell": 'psql -d shop -c "DROP PROCEDURE IF EXISTS archive_orders"', "output": "DROP"}
    sc = _sc([PROC, drop], "call the procedure you created", {"abstain": True})
    assert run(sc).passed


def test_a_trigger_ends_with_its_database() -> None:
    trig = {
        "shell": 'psql -d shop -c "CREATE TRIGGER orders_touch BEFORE UPDATE ON orders'
        ' FOR EACH ROW EXECUTE FUNCTION touch()"',
        "output": "CREATE TRIGGER",
    }
    gone = {"shell": "dropdb shop", "output": ""}
    assert run(_sc([trig], "disable the trigger you added",
                   {"kind": "trigger", "id": "orders_touch"})).passed  # fmt: skip
    assert run(_sc([trig, gone], "disable the trigger you added", {"abstain": True})).passed


def test_a_sequence_in_mysql_and_sqlite_statements() -> None:
    seq = {"shell": "mysql -u root shop -e 'CREATE SEQUENCE IF NOT EXISTS ticket_no'", "output": ""}
    sc = _sc([seq], "reset the sequence you created", {"kind": "sequence", "id": "ticket_no"})
    assert run(sc).passed
