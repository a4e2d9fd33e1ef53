"""track_entities on detached shell jobs (the ``background_jobs`` section of the entities pack):
the process is the detaching call's, later output-reading calls add its port to it, a stopping
call or an output showing the job ended ends it; nothing else is read as a job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rules.activity.background_jobs import has_ended, named_job, started_job
from rules.activity.entity_pack import load_entity_pack
from rules.base import SessionState
from rules.entities import track_entities
from tests.support.factories import assistant, call, ctx, result, user

CFG = track_entities.Config()
JOBS = load_entity_pack().jobs
BANNER = (
    "<status>running</status>\n\n<stdout>\n> app@0.0.0 dev\n> vite\n\n"
    "  VITE v5.4.2  ready in 412 ms\n\n  ➜  Local:   http://localhost:5173/\n</stdout>\n\n"
    "<timestamp>2025-11-04T20:41:31Z</timestamp>"
)
FAILED = (
    "<status>failed</status>\n\n<exit_code>1</exit_code>\n\n"
    "<stderr>Error: listen EADDRINUSE: address already in use :::5173</stderr>"
)
STARTED = "Command running in background with ID: 4cd766"


class Agent:
    """One session's requests, each call answered a few seconds after the one before."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [user("start the dev server")]
        self.state = SessionState()
        self.now = 1000.0
        self.calls = 0

    def call(self, name: str, args: dict[str, Any], output: str, is_error: bool = False) -> Any:
        self.calls += 1
        cid = f"c{self.calls}"
        answer = result(cid, output)
        if is_error:
            answer = {**answer, "is_error": True}
        self.messages += [assistant(None, call(cid, name, **args)), answer]
        self.now += 4.0
        res = track_entities.apply(ctx(list(self.messages), now=self.now, state=self.state), CFG)
        self.state = res.state
        return res

    def processes(self) -> list[dict[str, Any]]:
        return [e for e in self.state.get("entities") or [] if e["type"] == "process"]


def start(agent: Agent, output: str = STARTED) -> Any:
    args = {"command": "npm run dev", "run_in_background": True}
    return agent.call("Bash", args, output)


def test_the_detaching_call_makes_the_process_and_a_later_output_adds_its_port() -> None:
    agent = Agent()
    start(agent)
    [made] = agent.processes()
    assert (made["action"], made["id"], made["name"], made["call_id"]) == (
        "create",
        "4cd766",
        "npm run dev",
        "c1",
    )
    assert "port" not in made.get("attrs", {})
    agent.call("BashOutput", {"bash_id": "4cd766"}, BANNER)
    [served] = agent.processes()
    # the same entity, made by the same call at the same time, now with the port it serves
    assert {k: served[k] for k in ("path", "call_id", "first_seen", "seq")} == {
        k: made[k] for k in ("path", "call_id", "first_seen", "seq")
    }
    assert served["attrs"]["port"] == "5173"
    assert ["serves", "port:5173"] in served["rel"]
    assert made.get("attrs", {}).get("port") is None  # the stored event was not edited in place


@pytest.mark.parametrize(
    ("name", "args", "output"),
    [
        (
            "KillShell",
            {"shell_id": "4cd766"},
            {"message": "Successfully killed shell: 4cd766 (npm run dev)", "shell_id": "4cd766"},
        ),
        ("KillBash", {"shell_id": "4cd766"}, "Successfully killed shell: 4cd766 (npm run dev)"),
        (
            "TaskStop",
            {"task_id": "4cd766"},
            {"message": "Successfully stopped task: 4cd766 (npm run dev)"},
        ),
        (
            "BashOutput",
            {"bash_id": "4cd766"},
            FAILED,
        ),
        (
            "TaskOutput",
            {"task_id": "4cd766"},
            "<retrieval_status>success</retrieval_status>\n\n<task_id>4cd766</task_id>\n\n<status>completed</status>",
        ),
    ],
)
def test_a_stop_or_an_ended_status_ends_the_process(
    name: str, args: dict[str, Any], output: Any
) -> None:
    agent = Agent()
    start(agent)
    text = output if isinstance(output, str) else json.dumps(output)
    agent.call(name, args, text)
    actions = [(e["action"], e["id"]) for e in agent.processes()]
    assert actions == [("create", "4cd766"), ("delete", "4cd766")]


@pytest.mark.parametrize(
    ("name", "args", "output", "is_error"),
    [
        (
            "KillShell",
            {"shell_id": "4cd766"},
            "Shell 4cd766 is not running, so cannot be killed",
            True,
        ),
        ("KillShell", {"shell_id": "4cd766"}, "Failed to kill shell: 4cd766", False),
        (
            "KillShell",
            {"shell_id": "other1"},
            "Successfully killed shell: other1 (sleep 100)",
            False,
        ),
        (
            "BashOutput",
            {"bash_id": "4cd766"},
            "<status>running</status>\n\n<stdout>compiling…</stdout>",
            False,
        ),
    ],
)
def test_what_does_not_end_it_leaves_it_running(
    name: str, args: dict[str, Any], output: str, is_error: bool
) -> None:
    agent = Agent()
    start(agent)
    agent.call(name, args, output, is_error)
    assert [(e["action"], e["id"]) for e in agent.processes()] == [("create", "4cd766")]


def test_only_a_detached_call_or_the_harness_s_own_line_starts_a_job() -> None:
    agent = Agent()
    # the same words inside a foreground command's output (a log shown) start nothing
    agent.call("Bash", {"command": "cat notes.txt"}, f"notes:\n{STARTED}\n")
    agent.call("Bash", {"command": "npm run dev", "run_in_background": True}, "denied", True)
    assert agent.processes() == []
    moved = (
        "Command did not complete within its 120s timeout and was moved to the background "
        "(ID: b1x9k2). Output is being written to: /tmp/x/tasks/b1x9k2.output."
    )
    agent.call("Bash", {"command": "python -m http.server 8000"}, moved)
    assert [e["id"] for e in agent.processes()] == ["b1x9k2"]


def test_the_pack_functions() -> None:
    assert started_job(JOBS, {"run_in_background": True}, STARTED) == "4cd766"
    assert started_job(JOBS, {}, f"notes:\n{STARTED}") is None  # not the harness's first line
    assert started_job(JOBS, {"run_in_background": True}, f"shell ready\n{STARTED}") == "4cd766"
    assert named_job(JOBS, "BashOutput", {"bash_id": "4cd766"}) == ("4cd766", False)
    assert named_job(JOBS, "KillShell", {"shell_id": "4cd766"}) == ("4cd766", True)
    assert named_job(JOBS, "BashOutput", {"bash_id": "x" * 65}) is None
    assert named_job(JOBS, "Read", {"file_path": "/a"}) is None
    assert has_ended(JOBS, "<status>killed</status>")
    assert not has_ended(JOBS, "<retrieval_status>completed</retrieval_status>")
    assert not has_ended(JOBS, BANNER)
