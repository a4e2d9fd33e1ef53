"""The command a container or a pod runs for the agent: ``docker exec -it db psql -U app -c
"CREATE TABLE …"`` runs psql, whose SQL made a table, as ``psql -c`` on the host would have.
Read for what a command made beyond files (``entity_commands``): a table, a key, a record, a
branch is named inside the container as it is anywhere. Files are not (a path inside a container
is not the workspace's), so ``shell_parse`` does not read through it.

Forms: ``docker|podman|nerdctl exec [options] CONTAINER CMD…``, ``docker compose exec`` and
``docker-compose exec [options] SERVICE CMD…``, ``kubectl|oc exec [options] POD -- CMD…`` (what
follows ``--``: kubectl's form since 1.20; an older line without it is not read)."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

_CONTAINER_TOOLS = frozenset({"docker", "podman", "nerdctl"})
_POD_TOOLS = frozenset({"kubectl", "oc"})
_POD_GLOBALS = frozenset({"-n", "--namespace", "--context"})  # given before `exec`, with a value
# the options of `docker exec` and `docker compose exec` that take a value, skipped with it
_VALUED = frozenset(
    {"-e", "--env", "--env-file", "-u", "--user", "-w", "--workdir", "--detach-keys", "--index"}
)


def inside(argv: Sequence[str]) -> list[str] | None:
    """The command ``argv`` runs in a container or pod, or None when it runs none."""
    if not argv:
        return None
    program = posixpath.basename(argv[0])
    if program in _POD_TOOLS:
        at = 3 if argv[1:2] and argv[1] in _POD_GLOBALS else 1  # `kubectl -n data exec …`
        if argv[at : at + 1] != ["exec"] or "--" not in argv:
            return None
        inner = list(argv[argv.index("--") + 1 :])
        return inner or None
    if program in _CONTAINER_TOOLS and argv[1:3] == ["compose", "exec"]:
        rest = argv[3:]
    elif argv[1:2] == ["exec"] and (program in _CONTAINER_TOOLS or program == "docker-compose"):
        rest = argv[2:]
    else:
        return None
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        if rest[i] == "--":
            i += 1
            break
        i += 2 if rest[i] in _VALUED else 1
    inner = list(rest[i + 1 :])  # past the container's (the service's) name
    return inner or None
