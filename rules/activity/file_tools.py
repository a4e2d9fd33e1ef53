"""Which tool calls run shell commands and which touch files (the ``tools`` pack), whether a call's
result shows success, and what a call did: a shell command (parsed, in its ``workdir`` when it
names one), an ``apply_patch`` (its file headers) or a file tool (by its argument schema)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rules.activity.agent_tools import (
    PatchOp,
    cell_script,
    command_value,
    output_header,
    parse_patch,
    patch_argument,
    patch_in_argv,
    patch_in_script,
    patch_succeeded,
    workdir,
)
from rules.activity.failed_chain import ran_before_failure
from rules.activity.printed_paths import printed_effects
from rules.activity.refused_paths import refused_names, without_refused
from rules.activity.shell_parse import Effect, Verbs, analyse, guess_type, resolve_path
from rules.packs import builtin_strings, compile_regex, load_pack

# A result is scanned for exit codes, failures, folder listings and the working directory in its
# first and last SCAN_CHARS only: footers and error lines sit there, and a multi-megabyte dump in
# between costs nothing, whatever a user's pattern does with it.
SCAN_CHARS = 65_536


@dataclass(frozen=True)
class ToolPack:
    shell_tools: frozenset[str]
    command_keys: tuple[str, ...]
    path_keys: tuple[str, ...]
    operation_keys: tuple[str, ...]
    operations: Mapping[str, str]
    name_rules: tuple[tuple[re.Pattern[str], str, str | None], ...]
    folder_results: tuple[re.Pattern[str], ...]
    exit_codes: tuple[re.Pattern[str], ...]
    failures: tuple[re.Pattern[str], ...]
    cwd_hints: tuple[re.Pattern[str], ...]
    workdir_keys: tuple[str, ...] = ()
    patch_tools: frozenset[str] = frozenset()
    patch_keys: tuple[str, ...] = ()
    code_tools: frozenset[str] = frozenset()
    code_keys: tuple[str, ...] = ()


def _compile(patterns: Any, flags: int = re.I | re.M) -> tuple[re.Pattern[str], ...]:
    """Patterns from a user's pack are timed on adversarial inputs first (built-in ones are,
    by the test suite): one that backtracks too much fails start-up."""
    builtin = builtin_strings("tools")
    return tuple(
        compile_regex(str(p), flags, "tools pack", check=p not in builtin) for p in patterns or ()
    )


def scanned(result: str) -> str:
    """``result``, or its first and last SCAN_CHARS cut at line ends when it is longer."""
    if len(result) <= 2 * SCAN_CHARS:
        return result
    head = result.rfind("\n", 0, SCAN_CHARS) + 1 or SCAN_CHARS
    tail = result.find("\n", len(result) - SCAN_CHARS - 1) + 1 or len(result) - SCAN_CHARS
    return result[:head] + ("" if result[head - 1] == "\n" else "\n") + result[tail:]


@functools.lru_cache(maxsize=16)
def load_tools(extra_packs: tuple[str, ...] = ()) -> ToolPack:
    d = load_pack("tools", extra_packs)
    rules = []
    for r in d.get("name_rules") or ():
        rules.append((_compile([r["match"]])[0], str(r["action"]), r.get("type")))
    return ToolPack(
        shell_tools=frozenset(str(n).lower() for n in d.get("shell_tools") or ()),
        command_keys=tuple(d.get("command_keys") or ()),
        path_keys=tuple(d.get("path_keys") or ()),
        operation_keys=tuple(d.get("operation_keys") or ()),
        operations=dict(d.get("operations") or {}),
        name_rules=tuple(rules),
        folder_results=_compile(d.get("folder_results")),
        exit_codes=_compile(d.get("exit_codes")),
        failures=_compile(d.get("failures")),
        cwd_hints=_compile(d.get("cwd_hints")),
        workdir_keys=tuple(str(k) for k in d.get("workdir_keys") or ()),
        patch_tools=frozenset(str(n).lower() for n in d.get("patch_tools") or ()),
        patch_keys=tuple(str(k) for k in d.get("patch_keys") or ()),
        code_tools=frozenset(str(n).lower() for n in d.get("code_tools") or ()),
        code_keys=tuple(str(k) for k in d.get("code_keys") or ()),
    )


def shell_command(pack: ToolPack, name: str, args: Mapping[str, Any]) -> str | None:
    """The command line of a shell-like tool call, or None; of a notebook cell a code tool ran,
    the command line doing the same (``cell_script``)."""
    if name.lower() not in pack.shell_tools:
        if name.lower() in pack.code_tools:
            code = next((args[k] for k in pack.code_keys if isinstance(args.get(k), str)), "")
            return cell_script(code) if code.strip() else None
        return None
    for key in pack.command_keys:
        # a string, or argv: ["mkdir", "-p", "x"] (quoted back), ["bash", "-lc", "script"]
        command = command_value(args.get(key))
        if command is not None:
            return command
    return None


def patch_text(pack: ToolPack, name: str, args: Mapping[str, Any]) -> str | None:
    """The patch an ``apply_patch`` tool call applies (its ``input``/``patch`` argument)."""
    if name.lower() not in pack.patch_tools:
        return None
    return patch_argument(args, pack.patch_keys)


def succeeded(pack: ToolPack, result: str) -> bool:
    """True unless the result shows failure. An explicit exit code decides when there is one:
    first the one in a Codex-style header (``Process exited with code N`` / ``Exit code: N``
    before ``Output:``), whatever the output after it prints; then the pack's patterns."""
    header = output_header(result)
    if header is not None:
        if header.exit_code is not None:
            return header.exit_code == 0
        result = header.body
    result = scanned(result)
    for pattern in pack.exit_codes:
        found = pattern.findall(result)
        if found:
            last = found[-1]
            return str(last if isinstance(last, str) else last[0]).strip() == "0"
    return not any(p.search(result) for p in pack.failures)


def cwd_hint(pack: ToolPack, result: str) -> str | None:
    """The working directory a result reports (SWE-agent's ``(Current directory: …)``)."""
    result = scanned(result)
    for pattern in pack.cwd_hints:
        found = list(pattern.finditer(result))
        if found:
            cwd = found[-1].group("cwd").strip()
            if cwd.startswith(("/", "~")):
                return cwd
    return None


def call_succeeded(
    pack: ToolPack, name: str, args: Mapping[str, Any], result: str, is_error: bool = False
) -> bool:
    """Whether a call's result shows success: never when the tool message says ``is_error``
    (Anthropic's tool_result flag); an ``apply_patch`` only with positive evidence (exit code 0,
    "Success."); anything else unless its result shows failure (``succeeded``)."""
    if is_error:
        return False
    if patch_text(pack, name, args) is not None:
        return patch_succeeded(result)
    return succeeded(pack, result)


def patch_effects(
    ops: tuple[PatchOp, ...], cwd: str | None, known: Mapping[str, str]
) -> tuple[Effect, ...]:
    """The effects of a patch's file headers, paths resolved against ``cwd``."""
    out = []
    for op in ops:
        path = resolve_path(op.path, cwd)
        if op.action == "create":
            out.append(Effect("modify" if known.get(path) == "file" else "create", "file", path))
        elif op.action == "move" and op.source is not None:
            out.append(Effect("move", "file", path, resolve_path(op.source, cwd)))
        else:
            out.append(Effect(op.action, "file", path))
    return tuple(out)


def call_effects(
    pack: ToolPack,
    verbs: Verbs,
    name: str,
    args: Mapping[str, Any],
    result: str,
    cwd: str | None,
    known: Mapping[str, str],
    persist_cwd: bool = True,
    unknown: list[tuple[str, str | None]] | None = None,
) -> tuple[tuple[Effect, ...], str | None]:
    """(effects, working directory after) of a call whose result showed success; what a shell
    command made that only the shell could name is added to ``unknown``, when given
    (``ShellOutcome.unknown``).

    A ``workdir`` argument (Codex) sets the directory of that call only: such tools start each
    command in a fresh shell, so its ``cd`` does not carry over either. Without one, a ``cd``
    carries over when ``persist_cwd`` (agents with a persistent shell)."""
    wd = workdir(args, pack.workdir_keys)
    here = resolve_path(wd, cwd) if wd else cwd
    patch = patch_text(pack, name, args)
    if patch is not None:
        return patch_effects(parse_patch(patch), here, known), cwd
    command = shell_command(pack, name, args)
    if command is None:
        effect = file_tool_effect(pack, name, args, result, cwd, known)
        return ((effect,) if effect else ()), cwd
    outcome = analyse(command, here, verbs, known)
    if unknown is not None:
        unknown += outcome.unknown
    effects = outcome.effects + printed_effects(command, scanned(result), here, verbs.printed)
    raw = next((args[k] for k in pack.command_keys if k in args), None)
    patch = patch_in_argv(raw) or patch_in_script(command)
    if patch is not None:  # ["apply_patch", patch], or `apply_patch <<'EOF'` in a script
        effects += patch_effects(parse_patch(patch), outcome.cwd, known)
    refused = refused_names(scanned(result)) if effects else frozenset()
    if refused:  # `mkdir a; echo ok`: the chain exited 0, mkdir did not make a
        effects = without_refused(effects, refused)
    return effects, (outcome.cwd if persist_cwd and wd is None else cwd)


def effects_before_failure(
    pack: ToolPack,
    verbs: Verbs,
    name: str,
    args: Mapping[str, Any],
    result: str,
    cwd: str | None,
    known: Mapping[str, str],
) -> tuple[Effect, ...]:
    """The effects of a shell call whose result showed failure: what the leading commands of
    its ``&&`` chain did that ran and succeeded all the same (``failed_chain``). The working
    directory it leaves is not taken: a failed line is not followed into its folders."""
    command = shell_command(pack, name, args)
    ran = ran_before_failure(command, scanned(result)) if command is not None else None
    if ran is None:
        return ()
    wd = workdir(args, pack.workdir_keys)
    return analyse(ran, resolve_path(wd, cwd) if wd else cwd, verbs, known).effects


def file_tool_effect(
    pack: ToolPack,
    name: str,
    args: Mapping[str, Any],
    result: str,
    cwd: str | None,
    known: Mapping[str, str],
) -> Effect | None:
    """What a file tool did, from its argument schema: path key + operation or tool name."""
    raw = next((args[k] for k in pack.path_keys if isinstance(args.get(k), str) and args[k]), None)
    if raw is None:
        return None
    action, typ = None, None
    for key in pack.operation_keys:
        op = args.get(key)
        if isinstance(op, str) and op in pack.operations:
            action = pack.operations[op]
            break
    if action is None:
        for pattern, rule_action, rule_type in pack.name_rules:
            if pattern.search(name):
                action, typ = rule_action, rule_type
                break
    if action is None:
        return None
    path = resolve_path(raw.strip(), cwd)
    if any(p.search(scanned(result)) for p in pack.folder_results):
        typ = "folder"
    typ = typ or known.get(path) or guess_type(raw, recursive=False)
    if action == "create" and known.get(path) == typ:
        action = "modify"  # writing over a file this session already knows exists
    return Effect(action, typ, path)
