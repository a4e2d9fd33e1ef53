"""track_entities on Gemini CLI's shell tool as the chat view shows it: ``run_shell_command``
with its ``command`` run in ``dir_path``, a result saying ``[Exit Code: N]`` only when it failed."""

from __future__ import annotations

import pytest

from tests.rules.entities.test_agent_cli_tools import DIR, C, Step, tracked


def gemini(body: str = "", code: int = 0) -> str:
    """Gemini CLI's run_shell_command result (the exit code only when not 0)."""
    status = f"[Exit Code: {code}]\n" if code else ""
    tail = f"{status}[Process Group PGID: 26014]\n</untrusted_context>"
    return f"<untrusted_context>\nOutput: {body}\n{tail}"


CASES: list[tuple[str, list[Step], list[tuple[str, ...]]]] = [
    (
        "in its dir_path",
        [
            (
                "run_shell_command",
                {"command": "mkdir -p demo789 && echo made", "dir_path": "/w/p",
                 "description": "Run it"},
                gemini("made"),
            )
        ],
        [(C, DIR, "/w/p/demo789")],
    ),
    ("absolute", [("run_shell_command", {"command": "mkdir /w/q"}, gemini())], [(C, DIR, "/w/q")]),
    ("failed", [("run_shell_command", {"command": "mkdir /w/x"}, gemini("exists", 1))], []),
]  # fmt: skip


@pytest.mark.parametrize(("steps", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_tracking(steps: list[Step], expected: list[tuple[str, ...]]) -> None:
    assert tracked(*steps) == expected


MOVED = (
    "<untrusted_context>\nCommand moved to background (PID: 16540). Output hidden. Press Ctrl+B "
    "to view.\n</untrusted_context>"
)


def test_its_own_background_mode_tracks_the_process() -> None:
    """Gemini CLI's ``is_background: true`` answers with the PID it moved the command to: the
    server it started was never tracked, and "stop the server you started" found nothing."""
    args = {"command": "python3 -m http.server 8000", "is_background": True}
    assert tracked(("run_shell_command", args, MOVED)) == [(C, "process", "process:16540")]
    # the same words printed by a command not put in the background are its output
    plain = {"command": "cat notes.txt"}
    assert tracked(("run_shell_command", plain, MOVED)) == []
