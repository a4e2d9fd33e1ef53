"""What track_entities learns beyond files, call by call: from shell commands and what they
printed, SQL scripts run after they were written, structured (JSON) results, and ends matched to
what they end. Each case runs through the rule as a live request would (tests/support/scenarios)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules.activity.entity_commands import command_entities
from rules.activity.entity_pack import load_entity_pack
from rules.activity.entity_results import result_entities, singular
from rules.activity.shell_parse import load_verbs
from rules.entities import cache
from tests.support.scenarios import _Session

PACK = load_entity_pack()
SQL = "CREATE TABLE invoices (id int);"
SERVING = "Serving HTTP on 0.0.0.0 port 8000 (http://0.0.0.0:8000/) ..."


def _made(command: str, output: str = "", cwd: str = "/w") -> set[tuple[str, str, str]]:
    facts = command_entities(PACK, load_verbs(), command, output, cwd, {})
    return {(m.kind, m.id, m.action) for m in facts.made}


@pytest.mark.parametrize(
    ("command", "output", "want"),
    [
        (
            "git checkout -b feat/x",
            "Switched to a new branch 'feat/x'",
            ("branch", "feat/x", "create"),
        ),
        ("git switch -c fix-1", "", ("branch", "fix-1", "create")),
        ("git branch -D tmp", "Deleted branch tmp", ("branch", "tmp", "delete")),
        ("git tag v2.0.1", "", ("tag", "v2.0.1", "create")),
        (
            "git commit -am wip",
            "[main (root-commit) 1a2b3c4] wip\n 1 file changed",
            ("commit", "1a2b3c4", "create"),
        ),
        (
            "git stash",
            "Saved working directory and index state WIP on main: 1a2b3c4 x",
            ("stash", "stash@{0}", "create"),
        ),
        ("docker run -d --name cache redis:7", "f" * 64, ("container", "cache", "create")),
        ("docker run -d nginx", "ab12" * 16, ("container", "ab12ab12ab12", "create")),
        ("docker stop cache", "cache", ("container", "cache", "modify")),  # stopped, still there
        ("docker rm -f cache", "cache", ("container", "cache", "delete")),
        (
            "docker compose stop",
            " ✔ Container app-db-1  Stopped",
            ("container", "app-db-1", "modify"),
        ),
        (
            "docker compose down",
            " ✔ Container app-db-1  Removed",
            ("container", "app-db-1", "delete"),
        ),
        ("git branch -m old new", "", ("branch", "new", "move")),  # a rename, no new branch
        ("docker build -t api:1 .", "", ("image", "api:1", "create")),
        ("python3.12 -m venv env", "", ("virtualenv", "/w/env", "create")),
        ("pip install 'Django>=4.2'", "", ("package", "django", "create")),
        ("npm install --save lodash", "", ("package", "lodash", "create")),
        ("kubectl create deployment web --image=nginx", "", ("deployment", "web", "create")),
        ("kubectl apply -f k8s/", "service/api created", ("service", "api", "create")),
        ("kubectl delete pod debug", 'pod "debug" deleted', ("pod", "debug", "delete")),
        ("aws s3 mb s3://logs-1", "make_bucket: logs-1", ("bucket", "logs-1", "create")),
        ("gh pr create --fill", "https://github.com/o/r/pull/9", ("pull_request", "9", "create")),
        ("createdb shop", "", ("database", "shop", "create")),
        (
            "sqlite3 a.db 'create table if not exists Users (id int)'",
            "",
            ("table", "users", "create"),
        ),
        ("psql -c 'DROP TABLE old_logs'", "DROP TABLE", ("table", "old_logs", "delete")),
        (
            "docker compose up -d",
            " ✔ Container app-db-1  Started",
            ("container", "app-db-1", "create"),
        ),
        ("sleep 100 & echo $!", "4242", ("process", "4242", "create")),
        ("npm run dev &", "  ➜  Local:   http://localhost:5173/", ("process", ":5173", "create")),
    ],
)
def test_commands_and_outputs_make_entities(
    command: str, output: str, want: tuple[str, str, str]
) -> None:
    assert want in _made(command, output)


@pytest.mark.parametrize(
    "command",
    [
        "git branch --list",  # lists, makes nothing
        # written, not run
        "cat > make_db.py <<'EOF'\ncursor.execute('CREATE TABLE t (a int)')\nEOF",
        "python -c 'print(\"Serving HTTP on port 8000\")'",  # a foreground banner is no server
        "pip install -r requirements.txt -e .",  # files, not package names
    ],
)
def test_what_makes_no_entity(command: str) -> None:
    assert _made(command, "Serving HTTP on 0.0.0.0 port 8000") == set()


def test_insert_returning_an_id_makes_a_row_in_its_table() -> None:
    insert = 'psql -c "INSERT INTO orders (t) VALUES (1) RETURNING id"'
    printed = " id \n----\n 77\n(1 row)\n\nINSERT 0 1"
    facts = command_entities(PACK, load_verbs(), insert, printed, "/w", {})
    (row,) = facts.made
    assert (row.kind, row.id, dict(row.rel)["in"]) == ("row", "orders#77", "table:orders")


def test_commit_is_on_its_branch_and_a_container_mounts_its_folder() -> None:
    facts = command_entities(PACK, load_verbs(), "git commit -m x", "[feat/y 0a1b2c3] x", "/w", {})
    assert dict(facts.made[0].rel) == {"on": "branch:feat/y"}
    run = "docker run -d --name db -v ./data:/d -p 5433:5432 pg"
    facts = command_entities(PACK, load_verbs(), run, "", "/srv", {})
    (db,) = facts.made
    assert dict(db.rel) == {"mounts": "/srv/data"} and dict(db.attrs)["port"] == "5433"


def _track(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    agent = _Session("s", "/w", 1_700_000_000.0)
    for step in steps:
        agent.step(step)
    return list(agent.state.get(cache.NAMESPACE) or [])


def test_a_script_written_then_run_makes_its_tables_created_by_it() -> None:
    events = _track([
        {"tool": "write_file", "args": {"path": "/w/m/001.sql", "content": SQL}},
        {"shell": "psql -f m/001.sql", "output": "CREATE TABLE"},
    ])  # fmt: skip
    table = next(e for e in events if e["type"] == "table")
    assert table["path"] == "table:invoices" and table["rel"] == [["created_by", "/w/m/001.sql"]]


def test_failed_calls_make_nothing_and_ends_find_what_they_end() -> None:
    events = _track([
        {"shell": "git checkout -b dup", "exit": 128, "output": "fatal: a branch named 'dup'"},
        {"shell": "node server.js > log 2>&1 & echo $!", "output": "5151"},
        {"shell": "kill 5151", "output": ""},
    ])  # fmt: skip
    assert not any(e["type"] == "branch" for e in events)
    ends = [e["path"] for e in events if e["action"] == "delete"]
    assert ends == ["process:5151"]
    assert "process:5151" not in cache.known_types(events)


def test_a_server_still_running_counts_and_a_secret_is_never_remembered() -> None:
    events = _track([
        {"shell": "python3 -m http.server 8000", "exit": -1, "output": SERVING},
        {"shell": "git checkout -b sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD", "output": ""},
    ])  # fmt: skip
    assert [e["path"] for e in events] == ["process::8000"]


def test_structured_results_kind_from_shape_not_from_tool_names() -> None:
    def made(tool: str, args: dict[str, Any], result: Any) -> list[tuple[str, str, str]]:
        found = result_entities(PACK, tool, args, json.dumps(result), "c1")
        return [(m.kind, m.id, m.action) for m in found]

    assert made("createTicket", {}, {"id": "T-9", "title": "x"}) == [("issue", "T-9", "create")]
    assert made(
        "mcp__crm__query", {}, {"data": [{"id": 1, "object": "customer", "name": "A"}]}
    ) == [("customer", "1", "list")]
    listed = result_entities(
        PACK, "list_invoices", {}, json.dumps({"invoices": [{"id": "a"}, {"id": "b"}]}), "c2"
    )
    assert [(m.kind, m.id, dict(m.attrs)["position"]) for m in listed] == [
        ("invoice", "a", "1"),
        ("invoice", "b", "2"),
    ]
    assert made("delete_customer", {"customer_id": "cus_1"}, {"deleted": True}) == [
        ("customer", "cus_1", "delete")
    ]
    # a "type" that names no kind is an attribute ("premium"); the key names the kind
    assert made("search", {}, {"accounts": [{"id": 5, "type": "premium", "name": "Z"}]}) == [
        ("user", "5", "list")
    ]
    assert made("get_weather", {}, {"temp": 3}) == []  # no id: no entity
    assert made("read_file", {}, "not json") == []
    assert singular("companies") == "company" and singular("addresses") == "address"


GEMINI_SHELL = (
    "Command: python3 -m http.server 8000 &\nDirectory: (root)\nOutput: (empty)\n"
    "Error: (none)\nExit Code: 0\nSignal: (none)\nBackground PIDs: 31337\n"
    "Process Group PGID: 31330"
)


def test_gemini_clis_background_pid_is_the_servers() -> None:
    """Gemini CLI's run_shell_command reports a backgrounded job as ``Background PIDs: N``: the
    server it started was never tracked, and "stop the server you started" found nothing."""
    made = _made("python3 -m http.server 8000 &", GEMINI_SHELL)
    assert ("process", "31337", "create") in made
    listed = GEMINI_SHELL.replace("31337", "31337, 31338")
    assert ("process", "31337", "create") in _made("python3 -m http.server 8000 &", listed)
