"""What one observed tool call adds to the working set's ledger (``working_set``): the files it
wrote (or a script it ran wrote, or a move gave a new name), the files a delete or a revert made
unchanged again, the plan it set, and the run it was."""

from __future__ import annotations

from typing import Any

from rules.activity.aci_edits import aci_written
from rules.activity.agent_tools import (
    PATCH_MARK,
    command_value,
    parse_patch,
    patch_argument,
    patch_in_argv,
    patch_in_script,
)
from rules.activity.observations import (
    Observation,
    load_arguments,
    norm_path,
)
from rules.activity.run_class import only_shows
from rules.activity.run_key import raw_command
from rules.activity.storable import MAX_PATH_CHARS, stored_id
from rules.base import Message
from rules.context.file_names import same_file
from rules.context.one_off_runs import note_made, whole_writes
from rules.context.plan_ledger import update_plan
from rules.context.run_ledger import record_run
from rules.context.script_ledger import script_targets
from rules.context.settled_runs import mark_edited
from rules.context.undone_writes import Undone, copied_to, moved_to, undone_paths, without
from rules.messages import (
    call_arguments_text,
    text_of,
    tool_calls,
)
from rules.redact import redact_text


def _record_writes(
    ledger: dict[str, Any], paths: tuple[str, ...], obs: Observation, max_changed: int
) -> None:
    for path in map(redact_text, paths):
        if len(path) > MAX_PATH_CHARS:  # not a path: not kept (the state stays bounded)
            continue
        changed = [p for p in ledger.get("changed", []) if not same_file(p, path)]
        ledger["changed"] = [*changed, path][-max_changed:]
        writes = [w for w in ledger.get("writes", []) if not same_file(w["path"], path)]
        entry = {"path": path, "tool": obs.action.tool, "call_id": stored_id(obs.call_id)}
        ledger["writes"] = [*writes, entry][-3:]
        if ledger.get("runs"):  # a failure placed there shows what the old code did
            ledger["runs"] = mark_edited(ledger["runs"], (path,))


def written_paths(obs: Observation, result_text: str) -> tuple[str, ...]:
    """The paths a call wrote, as the ledger counts them: none when its result starts with
    "error", nor for a write that failed (``is_error``, an apply_patch without success, an exit
    code); a run that wrote (``cat <<EOF``, ``| tee``) did, whatever its exit code."""
    edited = aci_written(obs.action.command, result_text)  # SWE-agent's `edit 4:4` …
    if edited:
        return edited
    kind, said_error = obs.action.kind, result_text[:256].lstrip()[:5].lower() == "error"
    if kind == "run" and not said_error:
        return obs.action.writes
    if kind != "write" or said_error or obs.failed or obs.exit_code not in (None, 0):
        return ()
    return obs.action.writes or (obs.action.target,)


# file tools that write a whole file of the call's text (Claude Code's ``Write``, Gemini CLI's
# ``write_file``), by their normalised names
_WHOLE_TOOLS = frozenset({"write", "writefile", "create", "createfile"})


def _made_whole(obs: Observation, arguments: str | None) -> bool:
    """Whether a write made its file whole: a whole-file tool, an editor's ``create``, or
    SWE-agent's ``create F``."""
    action = obs.action
    if action.command.startswith("create "):
        return True
    name = "".join(c for c in action.tool.lower() if c.isalnum())
    if name in _WHOLE_TOOLS:
        return True
    args = load_arguments(arguments) if arguments is not None and action.kind == "write" else {}
    return args.get("command") == "create"


def _patched_away(arguments: str) -> tuple[str, ...]:
    """The files an ``apply_patch`` deleted (``*** Delete File:``) or moved away (an update's
    ``*** Move to:``), as its writes name them."""
    args = load_arguments(arguments)
    raw = args.get("command")
    patch = (
        patch_argument(args)
        or patch_in_argv(raw)
        or patch_in_script(raw if isinstance(raw, str) else command_value(raw) or "")
    )
    ops = parse_patch(patch) if patch is not None else ()
    gone = [op.path if op.action == "delete" else op.source for op in ops
            if op.action == "delete" or (op.action == "move" and op.source)]  # fmt: skip
    return tuple(norm_path(p) for p in gone if p)


def _calls_of(message: Message) -> dict[Any, dict[str, Any]]:
    """A message's tool calls by id (the first of an id)."""
    out: dict[Any, dict[str, Any]] = {}
    for c in tool_calls(message):
        out.setdefault(c.get("id"), c)
    return out


def record(
    ledger: dict[str, Any],
    messages: list[Message],
    obs: Observation,
    max_changed: int,
    max_runs: int,
    calls_at: dict[int, dict[Any, dict[str, Any]]],
) -> None:
    """``calls_at``: each message's calls by id, as read so far (a message of thousands of
    parallel calls is read once, not once a call)."""
    action = obs.action
    result_text = text_of(messages[obs.result_index].get("content"))
    ledger["seq"] = ledger.get("seq", 0) + 1
    calls = calls_at.get(obs.call_index)
    if calls is None:
        calls = calls_at[obs.call_index] = _calls_of(messages[obs.call_index])
    call = calls.get(obs.call_id)
    arguments = call_arguments_text(call) if call is not None else None
    if action.kind == "plan":  # a plan the harness refused (is_error, a validation error) is none
        if arguments is not None and not obs.failed and obs.exit_code in (None, 0):
            update_plan(ledger, arguments)
        return
    written = written_paths(obs, result_text)
    gone = _patched_away(arguments) if written and arguments and PATCH_MARK in arguments else ()
    if gone:  # a patch's deleted files and moves' sources: gone, as after rm and mv
        written = tuple(p for p in written if p not in gone)
        ledger["changed"] = without(ledger.get("changed") or [], Undone(gone))
        kept = set(ledger["changed"])
        ledger["writes"] = [w for w in ledger.get("writes", []) if w["path"] in kept]
    _record_writes(ledger, written, obs, max_changed)  # none unless it wrote
    ran = obs.exit_code in (None, 0) and not obs.failed
    # a shell call's arguments, read once (its raw command: a heredoc's lines kept)
    args = load_arguments(arguments) if action.command and arguments is not None else None
    if written and _made_whole(obs, arguments):  # a scratch script's run is a one-off
        note_made(ledger, written)
    elif args is not None and written:  # the heredoc wrote it, whatever the script then did
        note_made(ledger, whole_writes(raw_command(args) or ""))
    if args is not None and ran:  # what Python scripts it wrote or ran wrote
        _record_writes(ledger, script_targets(ledger, raw_command(args) or ""), obs, max_changed)
    if action.command and ran:
        # its lines as sent: `cp a b` and `python t.py` on two lines are two commands
        line = (raw_command(args) if args is not None else None) or action.command
        moved = moved_to(line, ledger.get("changed") or [])  # a change's new name
        undone = undone_paths(line, ledger["changed"]) if ledger.get("changed") else None
        if undone:  # a file deleted or reverted: changed no longer
            ledger["changed"] = without(ledger["changed"], undone)
            kept = set(ledger["changed"])
            ledger["writes"] = [w for w in ledger.get("writes", []) if w["path"] in kept]
        _record_writes(ledger, moved + copied_to(line), obs, max_changed)
    sent = raw_command(args) if args is not None else None  # its lines as sent (heredocs)
    if action.kind == "run" and not (sent and only_shows(sent)):  # a log shown is no run
        record_run(ledger, obs, result_text, args, ran, max_runs)
