""""The schema you created": a database's schema (`CREATE SCHEMA`, a database to the entities
pack) or a schema file (`schema.prisma`, `schema.graphql`), as what exists says; both made, it
abstains."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scenarios import Scenario, run

FILE = {"tool": "write_file", "args": {"path": "prisma/schema.prisma", "content": "model A {}"}}
SQL = {"shell": 'psql -d shop -c "CREATE SCHEMA analytics"', "output": "CREATE SCHEMA"}
DB = {"kind": "database", "id": "analytics"}
PATH = {"path": "/home/dev/app/prisma/schema.prisma"}


@pytest.mark.parametrize(
    ("lang", "steps", "ask", "expect"),
    [
        ("en", [SQL], "drop the schema you just created", DB),
        ("en", [FILE], "open the schema you just wrote", PATH),
        ("en", [FILE, SQL], "drop the schema you just created", {"abstain": True}),
        ("es", [SQL], "elimina el esquema que acabas de crear", DB),
        ("de", [SQL], "Lösch das Schema, das du gerade erstellt hast", DB),
        ("ja", [SQL], "さっき作ったスキーマを削除して", DB),
        ("ru", [FILE], "открой схему, которую ты только что создал", PATH),
    ],
)
def test_a_schema_is_either_as_what_exists_says(
    lang: str, steps: list[dict[str, Any]], ask: str, expect: dict[str, Any]
) -> None:
    sc = Scenario("t", lang, "non_file", "/home/dev/app", tuple(steps), ask, expect)
    outcome = run(sc)
    assert outcome.passed, outcome.describe()
