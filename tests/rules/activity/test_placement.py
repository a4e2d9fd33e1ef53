"""Where a thing was made inside another (rules/activity/placement.py): the namespace a
Kubernetes command names, the database a SQL client connects to, and a USE before a statement."""

from __future__ import annotations

import time

import pytest

from rules.activity.placement import USE, client_database, database_of, namespace_of


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["kubectl", "-n", "qa", "apply", "-f", "k8s/"], "qa"),
        (["kubectl", "apply", "--namespace=qa", "-f", "k8s/"], "qa"),
        (["kubectl", "-nqa", "create", "deployment", "web"], "qa"),
        (["helm", "install", "cache", "bitnami/redis", "--namespace", "infra"], "infra"),
        (["kubectl", "apply", "-f", "k8s/"], None),  # the manifest may name one: not guessed
        (["kubectl", "-n", "$NS", "apply"], None),
        (["kubectl", "-n", "Not_A_Name", "apply"], None),
    ],
)
def test_the_namespace_a_command_names(argv: list[str], want: str | None) -> None:
    assert namespace_of(argv) == want


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["psql", "-d", "shop", "-c", "CREATE TABLE t (a int)"], "shop"),
        (["psql", "-U", "postgres", "-h", "db", "Shop"], "shop"),
        (["psql", "postgresql://dev:pw@localhost:5432/shop?sslmode=require", "-c", "…"], "shop"),
        (["psql", "-c", "CREATE DATABASE shop"], None),
        (["mysql", "-u", "root", "-p", "shop", "-e", "…"], "shop"),  # -p takes no next word
        (["mysql", "-u", "root", "-Dshop"], "shop"),
        (["mysql", "--database=shop", "-e", "…"], "shop"),
        (["sqlite3", "app.db", "CREATE TABLE t (a int)"], None),
        (["psql", "$DATABASE_URL", "-c", "…"], None),
    ],
)
def test_the_database_a_client_connects_to(argv: list[str], want: str | None) -> None:
    assert client_database(argv) == want


def test_a_qualified_name_says_its_database_else_the_one_in_use() -> None:
    assert database_of("shop.orders", "other") == "shop"
    assert database_of("orders", "other") == "other"
    assert database_of("orders", None) is None


def test_use_starts_a_statement_only() -> None:
    text = "CREATE DATABASE shop; USE shop; CREATE TABLE orders (id int); SELECT 'we use it'"
    assert [m.group("db") for m in USE.finditer(text)] == ["shop"]
    assert [m.group("db") for m in USE.finditer("\\c shop\nCREATE TABLE t (a int);")] == ["shop"]


def test_use_is_linear_on_adversarial_text() -> None:
    for text in ("use " * 65_536, ";" * 262_144, "; \t" * 80_000 + "x", "'use \t\t\t\t" * 30_000):
        start = time.process_time()
        list(USE.finditer(text))
        assert time.process_time() - start < 0.5
