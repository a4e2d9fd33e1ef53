"""The statements a database client ran, in its command text or in a script the command ran
whose content an earlier call wrote: SQL's tables, databases, users and rows (`psql -c "CREATE
TABLE …"`, an insert's `RETURNING id`), MongoDB's collections (`mongosh --eval`). A statement
whose object an error line names made or ended nothing. The rules are the entities pack's
``statements``; ``entity_commands`` reads a command line with them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence

from rules.activity.entity_pack import MAX_SCAN, EntityPack, Made
from rules.activity.placement import DATABASE_KINDS, USE, database_of

MAX_STATEMENTS = 20  # per script or command
Statement = tuple[str, str, str]  # (kind, action, id)


def script_statements(pack: EntityPack, text: str) -> list[Statement]:
    """The statements of a script's content that make, change or end tables and databases."""
    return [(k, a, i) for k, a, i, _, _ in _statements(pack, text) if k != "row"]


# An SQL comment ("-- create role later"): two dashes and a blank opening a line, a quoted
# statement or what follows a `;` (not a shell's `--` ending a command's options, after a blank:
# `git checkout -- schema.sql && psql -c "CREATE TABLE …"`; an option, `--file`, has no blank)
_SQL_COMMENT = re.compile(r"""(?:^|(?<=[;"']))[ \t]*+--[ \t][^\n]*+""", re.MULTILINE)


def _clean(text: str) -> str:
    """``text`` as its statements are read: bounded, its comments read as nothing."""
    text = text[:MAX_SCAN]
    if "-- " in text or "--\t" in text:
        text = _SQL_COMMENT.sub("", text)
    return text


def _statements(
    pack: EntityPack, text: str
) -> list[tuple[str, str, str, Mapping[str, str], int]]:
    """(kind, action, id, groups, where it starts in ``_clean(text)``) of the SQL statements
    in ``text``, in order."""
    found = []
    text = _clean(text)
    for rule in pack.statements:
        for m in rule.regex.finditer(text):
            g = {k: v for k, v in m.groupdict().items() if v}
            if not rule.spec.get("keep_case"):  # SQL folds unquoted names; MongoDB does not
                g = {k: v.lower() if k in ("id", "table", "from") else v for k, v in g.items()}
            ident = g.get("id") or ("" if rule.spec.get("returning") else None)
            if ident is None:
                continue
            found.append((m.start(), rule.kind, rule.action, ident, g))
    found.sort(key=lambda x: x[0])
    return [(k, a, i, g, at) for at, k, a, i, g in found[:MAX_STATEMENTS]]


def _rows(pack: EntityPack, table: str, output: str, by: str) -> Iterator[Made]:
    """The row an insert made, when the output shows its id (``RETURNING id``)."""
    m = pack.returned_id.search(output[:MAX_SCAN])
    if m:
        ident = m.group("id")
        yield Made("row", f"{table}#{ident}", "create", ident, (("table", table), ("id", ident)),
                   (("in", f"table:{table}"),), by)  # fmt: skip


# a line a SQL client printed for a statement that failed (psql's `ERROR:  relation "orders"
# already exists`, sqlite3's `Parse error near line 1: …`, mysql's `ERROR 1050 (42S01) …`); psql
# without ON_ERROR_STOP exits 0 all the same; MongoDB's shells: `MongoServerError: Collection
# already exists. NS: crm.leads`, the legacy shell's `{ "ok" : 0, "errmsg" : "…" }` (exit 0), a
# caught error printed (`Collection crm.leads already exists.`)
_SQL_ERROR = re.compile(
    r"^[ \t]{0,8}(?:ERROR|Error|Parse error|FATAL)\b[^\n]{0,500}"
    r"|\b(?:MongoServerError|MongoError|errmsg)\b[^\n]{0,500}"
    r"|^[^\n]{0,300}?\balready[ \t]{1,3}exists\b[^\n]{0,200}",
    re.MULTILINE,
)
_MAX_SQL_ERRORS = 50


def _refused(ident: str, errors: list[str]) -> bool:
    """Whether an error line names ``ident`` as a whole word (`"orders"`, `'orders'`, orders)."""
    name = ident.lower()
    for line in errors:
        at = line.find(name)
        while at >= 0:
            before = line[at - 1] if at else " "
            after = line[at + len(name)] if at + len(name) < len(line) else " "
            if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
                return True
            at = line.find(name, at + 1)
    return False


def sql_made(
    pack: EntityPack,
    text: str,
    output: str,
    by: str,
    source: str | None,
    database: str | None = None,
) -> Iterator[Made]:
    """What the statements of ``text`` made, changed and ended; ``database``: the one the
    client connected to (a table made is ``in`` it, or in the one a ``USE`` chose before it)."""
    rel = (("created_by", source),) if source else ()
    errors = [m.group(0).lower() for m in _SQL_ERROR.finditer(output[:MAX_SCAN])]
    uses = [(m.start(), m.group("db").lower()) for m in USE.finditer(_clean(text))] if (
        "use" in text.lower() or "\\c" in text) else []  # fmt: skip
    for kind, action, ident, g, at in _statements(pack, text):
        current = next((db for start, db in reversed(uses) if start < at), database)
        where = database_of(ident, current) if kind in DATABASE_KINDS else None
        if errors and _refused(ident, errors[:_MAX_SQL_ERRORS]):
            continue  # its statement failed: made nothing, ended nothing
        if kind == "row" and action == "create":
            yield from _rows(pack, str(g.get("table", "")), output, by)
        elif kind == "row":
            table = str(g.get("table", ""))
            yield Made("row", f"{table}#{ident}", action, ident, (("table", table),), (), by)
        elif action == "move":  # ALTER TABLE x RENAME TO y
            was = f"{kind}:{g.get('from', '')}"
            yield Made(kind, ident, action, ident, (), (), by, was)
        elif action == "create":
            inside = (("in", f"database:{where}"),) if where else ()
            yield Made(kind, ident, action, ident, (), (*rel, *inside), by)
        else:
            yield Made(kind, ident, action, ident, (), (), by)


def script_made(statements: Sequence[Statement], path: str, by: str) -> Iterator[Made]:
    """The tables a script made when it ran: created by that script."""
    for kind, action, ident in statements:
        rel = (("created_by", path),) if action == "create" else ()
        yield Made(kind, ident, action, ident, (), rel, by)
