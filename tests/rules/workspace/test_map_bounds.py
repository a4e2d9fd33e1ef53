"""The map's work per request is bounded whatever the commands: a folder copied into itself
(``cp -r a a/c0 && cp -r a a/c1 …``) doubled the map with each copy, before its bound was
applied at the end of the request (14 copies of a 1 KiB request: 1 s and 43 MiB); and moves of
a large folder back and forth each looked at every entry (3.5 s for a 45 KiB line)."""

from __future__ import annotations

import time

from rules.activity.shell_parse import analyse, load_verbs
from rules.activity.storable import MAX_PATH_DEPTH
from rules.workspace import tree, workspace_map
from tests.rules.workspace.test_workspace_map import nodes, ok, run
from tests.support.factories import shell

FILES = " ".join(f"a/f{i}" for i in range(10))


def test_a_folder_copied_into_itself_stays_within_the_bound() -> None:
    cfg = workspace_map.Config(max_entries=40)
    copies = " && ".join(f"cp -r a a/c{i}" for i in range(16))
    started = time.thread_time()
    wsmap = run(
        (shell("c1", f"cd /p && mkdir -p a && touch {FILES}"), ok()),
        (shell("c2", f"cd /p && {copies}"), ok()),
        cfg=cfg,
    )
    assert time.thread_time() - started < 0.5  # minutes and gigabytes at 20 copies, before
    assert len(nodes(wsmap)) <= cfg.max_entries
    assert any(p.startswith("/p/a/c15/") for p in nodes(wsmap))  # the newest copy is kept


def test_moves_past_the_visits_act_on_their_own_path() -> None:
    table = {f"/p/a/f{i}": ["f", "l", 1] for i in range(100)} | {"/p/a": ["d", "l", 1]}
    whole = dict(table)
    tree.move(whole, "/p/a", "/p/b", "d", 2)
    assert "/p/b/f7" in whole and "/p/a/f7" not in whole
    alone = dict(table)
    tree.move(alone, "/p/a", "/p/b", "d", 2, whole=False)
    assert "/p/b" in alone and "/p/a" not in alone and "/p/a/f7" in alone
    many = " && ".join("mv a b && mv b a" for _ in range(2_000))
    started = time.thread_time()
    run(
        (shell("c1", "cd /p && ls a"), ok("".join(f"f{i}.txt\n" for i in range(600)))),
        (shell("c2", f"cd /p && {many}"), ok()),
    )
    assert time.thread_time() - started < 1.5  # 3.5 s for a 45 KiB line, before


def test_paths_nested_past_the_depth_are_not_kept() -> None:
    line = "cd /p && " + "cd d && mkdir x && " * 2_000 + "true"
    outcome = analyse(line, None, load_verbs())
    # past the depth the working directory is unknown: what the line makes stays that shallow
    assert outcome.cwd is None or outcome.cwd.count("/") <= MAX_PATH_DEPTH
    assert all(e.path.count("/") <= MAX_PATH_DEPTH + 1 for e in outcome.effects)
    started = time.thread_time()
    wsmap = run((shell("c1", line), ok()))
    assert time.thread_time() - started < 1.5  # 2.4 s, and each later request 1 s, before
    assert all(p.count("/") <= MAX_PATH_DEPTH for p in nodes(wsmap))


def test_a_known_files_removal_looks_at_nothing_else() -> None:
    """Single files removed cost no visits: after 400 `rm -f` of known files, a folder's removal
    still takes its subtree (it was left listed once ~180 removals had spent the visits)."""
    listing = "".join(f"f{i}.txt\n" for i in range(1_100)) + "build\n"
    removals = " && ".join(f"rm -f /repo/f{i}.txt" for i in range(400))
    wsmap = run(
        (shell("c1", "cd /repo && ls"), ok(listing)),
        (shell("c2", "mkdir -p /repo/build/lib && touch /repo/build/lib/a.so"), ok()),
        (shell("c3", removals), ok()),
        (shell("c4", "rm -rf /repo/build"), ok()),
    )
    assert not [p for p in nodes(wsmap) if p.startswith("/repo/build")]
