"""The command a container or a pod runs, read out of ``docker exec`` and its kin."""

from __future__ import annotations

import pytest

from rules.activity.exec_inside import inside


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ("docker exec -it db psql -c x", ["psql", "-c", "x"]),
        ("docker exec -u postgres -e A=1 --workdir /srv db psql", ["psql"]),
        ("docker exec --user=postgres db psql", ["psql"]),
        ("/usr/bin/podman exec db redis-cli SET k v", ["redis-cli", "SET", "k", "v"]),
        ("docker compose exec -T --index 2 db psql", ["psql"]),
        ("docker-compose exec db mysql -e x", ["mysql", "-e", "x"]),
        ("kubectl exec -it -n data pg-0 -c main -- psql -c x", ["psql", "-c", "x"]),
        ("oc exec pg-0 -- sh", ["sh"]),
        ("kubectl -n data exec pg-0 -- psql", ["psql"]),
        # nothing run inside, or not an exec
        ("docker exec db", None),
        ("docker exec -it", None),
        ("kubectl exec pg-0 psql", None),  # the pre-1.20 form: not read
        ("kubectl exec pg-0 --", None),
        ("kubectl logs exec -- x", None),  # a pod named exec: no exec run
        ("docker run -it postgres psql", None),
        ("docker logs exec", None),
        ("docker", None),
        ("", None),
    ],
)
def test_inside(argv: str, expected: list[str] | None) -> None:
    assert inside(argv.split()) == expected
