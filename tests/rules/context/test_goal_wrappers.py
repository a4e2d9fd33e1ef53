"""The goal is the user's task, not a harness's wrapper around it: a worked example ahead of the
task (OpenHands' "START OF EXAMPLE … END OF EXAMPLE", SWE-agent's demonstration turn), Claude
Code's slash commands' echo and output. In the corpus all five swe-play conversations had the
example's "Create a list of numbers from 1 to 10" as their goal."""

from __future__ import annotations

from tests.rules.context.test_working_set import ledger_of
from tests.support.factories import assistant, user

EXAMPLE = (
    "Here's a running example of how to perform a task with the provided tools.\n\n"
    "--------------------- START OF EXAMPLE ---------------------\n\n"
    "USER: Create a list of numbers from 1 to 10, and display them in a web page at port 5000.\n"
    "ASSISTANT: Sure!\n\n"
    "--------------------- END OF EXAMPLE ---------------------\n\n"
    "--------------------- NEW TASK DESCRIPTION ---------------------\n"
    "Create a CPU class that combines registers, memory, and program counter."
)
DEMONSTRATION = (
    "Here is a demonstration of how to correctly accomplish this task.\n--- DEMONSTRATION ---\n"
    "We're currently solving the following issue: TimeDelta serialization precision\n"
    "--- END OF DEMONSTRATION ---\n"
)


def test_the_task_after_a_worked_example() -> None:
    goal = ledger_of(user(EXAMPLE), assistant("ok"))["goal"]
    assert "CPU class" in goal and "numbers from 1 to 10" not in goal


def test_a_demonstration_turn_is_not_the_goal() -> None:
    ledger = ledger_of(user(DEMONSTRATION), user("Fix the missing colon in tests/a.py"))
    assert ledger["goal"] == "Fix the missing colon in tests/a.py"


def test_a_slash_commands_echo_and_output_are_not_the_users_words() -> None:
    model = (
        "<command-name>/model</command-name>\n<command-message>model</command-message>\n"
        "<command-args>opus</command-args>"
    )
    said = "<local-command-stdout>Set model to Opus</local-command-stdout>"
    ledger = ledger_of(user("Add a --verbose flag"), assistant("done"), user(model), user(said))
    assert ledger["goal"] == "Add a --verbose flag" and ledger.get("instruction") is None


def test_a_harness_written_turn_is_no_instruction() -> None:
    """Claude Code's summary after its own compaction and OpenHands' nudge are the harness's
    words: the latest instruction stays the user's."""
    summary = (
        "This session is being continued from a previous conversation that ran out of context. "
        "The conversation is summarized below: …"
    )
    nudge = "Please continue working on the task on whatever approach you think is suitable."
    for turn in (summary, nudge):
        ledger = ledger_of(user("Fix the parser"), assistant("ok"), user("Also add tests"),
                           assistant("done"), user(turn))  # fmt: skip
        assert ledger["goal"] == "Fix the parser" and ledger["instruction"] == "Also add tests"
