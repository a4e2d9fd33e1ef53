"""Where a thing was made inside another, recorded as its relation ``in``: a Kubernetes resource
in the namespace its command names (``kubectl apply -n staging``, ``helm install cache -n
infra``), a table in the database its client was connected to (``psql -d shop``, ``mysql
shop``, ``USE shop;``) or its qualified name names (``shop.orders``). The container's end ends
what it held (``rules/entities/contents_end``): a deployment of a deleted namespace, or a table
of a dropped database, is no candidate any more. Pure; what is not named is not guessed (a
resource with no ``-n`` may be in a namespace its manifest names: it gets no relation)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rules.activity.command_words import flag_value, positionals
from rules.activity.entity_pack import Made

NAMESPACED_PROGRAMS = frozenset(("kubectl", "helm", "oc"))
_NAMESPACE_FLAGS = ("-n", "--namespace")
# kinds no namespace holds (a namespace itself, a cluster, a cluster's roles are not told apart)
_CLUSTER_KINDS = frozenset(("namespace", "cluster", "node"))
_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def namespace_of(argv: Sequence[str]) -> str | None:
    """The namespace a Kubernetes command names (``-n x``, ``-nx``, ``--namespace=x``)."""
    value = flag_value(argv, _NAMESPACE_FLAGS)
    if value is None:
        value = next((a[2:].lstrip("=") for a in argv if a.startswith("-n") and len(a) > 2
                      and not a.startswith("--")), None)  # fmt: skip
    return value if value and _NAME.fullmatch(value) else None


def placed(made: Sequence[Made], container: str | None, kinds: frozenset[str] | None) -> list[Made]:
    """``made`` with ``("in", container)`` added to each creation of one of ``kinds`` (None:
    any but the cluster's own) that has no ``in`` yet."""
    if container is None:
        return list(made)
    return [
        Made(m.kind, m.id, m.action, m.name, m.attrs, (*m.rel, ("in", container)), m.by, m.source)
        if m.action == "create"
        and (m.kind in kinds if kinds is not None else m.kind not in _CLUSTER_KINDS)
        and not any(r == "in" for r, _ in m.rel)
        else m
        for m in made
    ]


# the options of a database client that take the next word (its positional word is a database)
_PSQL_VALUES = frozenset(
    ("-c", "--command", "-f", "--file", "-h", "--host", "-p", "--port", "-U", "--username",
     "-v", "--set", "--variable", "-o", "--output", "-F", "-R", "-P", "--pset", "-T", "-L",
     "--log-file", "-d", "--dbname")
)  # fmt: skip
# mysql's `-p` takes no next word (`-psecret`, or it asks)
_MYSQL_VALUES = frozenset(
    ("-e", "--execute", "-h", "--host", "-P", "--port", "-u", "--user", "-S", "--socket", "-D",
     "--database")
)  # fmt: skip
_CLIENT_VALUES: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "psql": (_PSQL_VALUES, ("-d", "--dbname")),
    "mysql": (_MYSQL_VALUES, ("-D", "--database")),
    "mariadb": (_MYSQL_VALUES, ("-D", "--database")),
}
_DB_NAME = re.compile(r"[A-Za-z_][\w$]{0,63}")
# a connection URI's database: `postgresql://u@host:5432/shop?sslmode=require`
_URI_DB = re.compile(r"^[a-z][a-z0-9+]{1,20}://[^/\s]{0,200}/(?P<db>[A-Za-z_][\w$]{0,63})(?:\?|$)")
DATABASE_KINDS = frozenset(("table", "view", "index", "sequence", "trigger", "routine"))


def client_database(argv: Sequence[str]) -> str | None:
    """The database a SQL client's command line connects to (``psql -d shop``, ``psql shop``,
    ``mysql -D shop``, ``mysql shop``, a connection URI), lowercased as SQL folds it."""
    spec = _CLIENT_VALUES.get(argv[0]) if argv else None
    if spec is None:
        return None
    skip, flags = spec
    args = argv[1:]
    value = flag_value(args, flags)
    if value is None:
        value = next((a[2:] for a in args if a.startswith("-D") and len(a) > 2), None)
    if value is None:
        words = positionals(args, skip)
        value = words[0] if words else None
    if value is None:
        return None
    uri = _URI_DB.match(value)
    value = uri.group("db") if uri else value
    return value.lower() if _DB_NAME.fullmatch(value) else None


# a statement choosing the database those after it run in (MySQL's `USE shop;`, psql's `\c shop`)
USE = re.compile(
    r"""(?:^|(?<=[;\n"']))[ \t]{0,8}+(?:use|\\c(?:onnect)?+)[ \t]{1,8}+[`"]?"""
    r"(?P<db>[A-Za-z_][\w$]{0,63})",
    re.IGNORECASE,
)


def database_of(ident: str, current: str | None) -> str | None:
    """The database a table is in: its qualified name's first part (``shop.orders``), else the
    one in use."""
    head, dot, _ = ident.partition(".")
    return head if dot and head else current
