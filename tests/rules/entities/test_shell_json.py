"""JSON printed by API clients in the shell (scenarios/shell_json.yaml, run as a live proxy would
see them), and how a command line names its request (rules/activity/shell_json.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.activity.entity_pack import load_entity_pack
from rules.activity.shell_json import api_request, printed_json
from tests.support.scenarios import Scenario, load, run

SCENARIOS = load(Path(__file__).resolve().parent / "scenarios" / "shell_json.yaml")
CLIENTS = load_entity_pack().results["json_clients"]


@pytest.mark.parametrize("scenario", [pytest.param(sc, id=sc.id) for sc in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    outcome = run(scenario)
    assert outcome.passed, outcome.describe()


@pytest.mark.parametrize(
    ("argv", "tool"),
    [
        (["curl", "-X", "POST", "https://x.test/v1/customers", "-d", "{}"], "create_customers"),
        (["curl", "-d", "{}", "https://x.test/api/v2/orders"], "create_orders"),
        (["curl", "-s", "https://x.test/v1/customers/cus_123?expand=x"], "list_customers"),
        (["curl", "--request=DELETE", "https://x.test/v1/customers/cus_123"], "delete_customers"),
        (["gh", "api", "repos/o/r/pulls", "-f", "title=x"], "create_pulls"),
        (["http", "PATCH", "x.test/tickets/99", "status=closed"], "update_tickets"),
        # a flag's value before the URL is not the URL (a header's ``/``, a file, a body's ``.``)
        (["curl", "-s", "-H", "Content-Type: application/json", "-X", "POST",
          "http://localhost:8000/api/users", "-d", "{}"], "create_users"),
        (["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "DELETE",
          "http://localhost:8000/api/users/1842"], "delete_users"),
        (["curl", "-d", '{"email": "a@b.example"}', "localhost:8000/api/users"], "create_users"),
    ],
)
def test_a_request_is_named_by_its_method_and_collection(argv: list[str], tool: str) -> None:
    found = api_request(CLIENTS[argv[0]], argv)
    assert found is not None and found[0] == tool


def test_no_request_without_a_url_or_the_subcommand() -> None:
    assert api_request(CLIENTS["curl"], ["curl", "--version"]) is None
    assert api_request(CLIENTS["gh"], ["gh", "pr", "create", "--title", "x"]) is None


def test_the_printed_document_without_headers_or_footer() -> None:
    out = (
        "HTTP/2 201\ncontent-type: application/json\n\n"
        + '{"id": 1}\n[Command finished with exit code 0]'
    )
    out = out.replace("HTTP/2", "HTTP/1.1")
    assert printed_json(out) == '{"id": 1}'
    assert printed_json('[{"id": 1}]') == '[{"id": 1}]'
    assert printed_json("no json here") is None
