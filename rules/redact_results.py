"""Secrets a tool's result prints alone, known by the call that printed them, for
``rules.redact.redact``: ``op read op://vault/db/password``, ``vault kv get -field=password``,
``aws secretsmanager get-secret-value … --output text``, ``kubectl get secret … | base64 -d``,
``heroku auth:token``, ``cat secrets/db_password``, ``echo $DB_PASSWORD`` print the secret on a
line of its own, with no name beside it: the texts' net cannot tell it from any word. A body's
message list links each result to its call (by id; Gemini's by name and order), so a result of
such a call has each line that is one word (4 characters or more, no blank) replaced. Lines with
blanks (an error, a table's header, Codex's ``Process exited with code 0``) stay, and so do
results of any other call. Linear: a call's text is read 4 KiB at most, a result 64 KiB."""

from __future__ import annotations

import re
from itertools import islice
from typing import Any

from rules.redact_names import is_secret_name
from rules.redact_shapes import REDACTED

# Commands that print a secret's value alone
_READS = re.compile(  # a word's start is checked after a match (``_word_starts``)
    r"(?:op[ \t]++(?:read|item[ \t]++get)"
    r"|secretsmanager[ \t]++get-secret-value"
    r"|gcloud[ \t]++(?:secrets[ \t]++versions[ \t]++access"
    r"|auth[ \t]++print-(?:access|identity)-token)"
    r"|keyvault[ \t]++secret[ \t]++show|heroku[ \t]++auth:token|gh[ \t]++auth[ \t]++token"
    r"|ecr[ \t]++get-login-password|az[ \t]++account[ \t]++get-access-token"
    r"|secret-tool[ \t]++lookup|pass[ \t]++show|bw[ \t]++get[ \t]++password"
    r"|doppler[ \t]++secrets[ \t]++get)\b"
)
# Commands that print one only with an option: both parts anywhere in the call (two searches,
# each linear, where one pattern with a gap between them would read the gap at every start),
# after a literal the first holds (``in`` is ~20x faster than a search that tries every position)
_READS_WITH = (
    ("vault", re.compile(r"\bvault[ \t]++(?:kv[ \t]++get|read)\b"), re.compile(r"[ \t]-field\b")),
    ("ssm", re.compile(r"\bssm[ \t]++get-parameters?+\b"), re.compile(r"--with-decryption\b")),
    ("kubectl", re.compile(r"\bkubectl\b"), re.compile(r"[ \t]get[ \t]++secrets?+\b")),
    ("-password", re.compile(r"\bfind-(?:generic|internet)-password\b"), re.compile(r"[ \t]-w\b")),
)
# A variable printed: ``echo $DB_PASSWORD``, ``echo "${API_KEY}"``, ``printenv GITHUB_TOKEN``
_PRINTED_VAR = re.compile(
    r"(?:echo(?:[ \t]++-[neE]{1,3})?[ \t]++\\{0,3}[\"']?\$\{?|printenv[ \t]++)"
    r"(?P<name>[A-Za-z_]\w{0,63})"
)
# A file read whole: by a shell's reader, or a read tool's file argument (not a bare ``path``:
# Glob's and Grep's name a folder, and a listing of ``credentials/`` is no secret)
_FILE_READ = re.compile(
    r"(?:cat|head|tail|more|less|strings|type|Get-Content)[ \t]++(?:-\S{1,16}[ \t]++){0,4}"
    r"(?P<path>[^\s|;&<>'\"\\]{1,512})"
    r"|(?:file_?[pP]ath|absolute_path)\\{0,3}[\"']?[ \t]*+:[ \t]*+\\{0,3}[\"']"
    r"(?P<arg>[^\s'\"\\]{1,512})"
)
# the directories secrets are kept in (Docker's /run/secrets, a repo's secrets/)
_SECRET_DIRS = frozenset({"secrets", ".secrets", "secret", "credentials"})
# a file holding a secret alone has no extension or one of these (not code: auth.py prints code)
_PLAIN_EXTENSIONS = frozenset({"", "txt", "key", "secret", "token", "pass", "cred", "creds"})
# file names that say secret but hold something else (``/etc/passwd``: accounts, no passwords)
_NOT_SECRET_FILES = frozenset({"passwd", "group"})
# a file of OpenVPN's ``auth-user-pass``: ``auth.txt``, ``login.conf`` under a VPN's folder
_VPN_FILES = frozenset({"auth", "login", "pass", "userpass", "credentials"})

_CALL_TEXT = 4096  # characters of a call's arguments read
_MATCHES = 16  # variables printed and files read judged in one call, at most
_RESULT_TEXT = 65_536  # a result longer is no secret printed alone
# one-word lines a result may hold and be secrets printed: more is a listing a call beside the
# read printed too (``export T=$(cat secrets/t); pip list``), each line no secret
_MAX_ALONE = 4
_ALONE = re.compile(r"[ \t]*+(?P<word>\S{4,1024}+)[ \t]*+\r?")
_KEPT_WORDS = frozenset({"null", "none", "true", "false", "output:", "done", "(no output)"})
_CODEX_OUTPUT = "\nOutput:\n"  # Codex's header before a command's output
_MAX_DEPTH = 6


def reads_secret(call: str) -> bool:
    """Whether the call whose arguments' text is ``call`` prints a secret alone."""
    call = call[:_CALL_TEXT]
    if any(_word_starts(call, m.start()) for m in islice(_READS.finditer(call), _MATCHES)):
        return True
    if any(lit in call and a.search(call) and b.search(call) for lit, a, b in _READS_WITH):
        return True
    printed = islice(_PRINTED_VAR.finditer(call), _MATCHES)
    if any(_word_starts(call, m.start()) and is_secret_name(m["name"]) for m in printed):
        return True
    reads = islice(_FILE_READ.finditer(call), _MATCHES)
    return any(_word_starts(call, m.start()) and _secret_file(m["path"] or m["arg"]) for m in reads)


def _word_starts(text: str, at: int) -> bool:
    """Whether a word starts at ``at`` (``cat``, not ``concat``): checked after a match, where a
    leading ``\\b`` would make the search try every position."""
    return at == 0 or not (text[at - 1].isalnum() or text[at - 1] in "_-")


def _secret_file(path: str) -> bool:
    parts = [p for p in re.split(r"[/\\]", path.strip("'\"")) if p]
    if not parts:
        return False
    stem, _, ext = parts[-1].rpartition(".") if "." in parts[-1][1:] else (parts[-1], "", "")
    stem = stem or parts[-1]
    if ext.lower() not in _PLAIN_EXTENSIONS or stem.lower() in _NOT_SECRET_FILES:
        return False
    if any(p.lower() in _SECRET_DIRS for p in parts[:-1]):
        return True
    if stem.lower() in _VPN_FILES and any("vpn" in p.lower() for p in parts[:-1]):
        return True
    return is_secret_name(stem)


def printing_calls(messages: list[Any]) -> set[str]:
    """The ids of the calls in ``messages`` (a body's message list, any protocol's) that print
    a secret alone (Gemini's, which may have none, as ``name#n``: its n-th call of that name)."""
    found: set[str] = set()
    named: dict[str, int] = {}
    for call_id, text in _calls(messages, named):
        if call_id and reads_secret(text):
            found.add(call_id)
    return found


def redact_printed(messages: list[Any], ids: set[str]) -> None:
    """Replaces, in ``messages`` (a redacted copy, changed in place), each one-word line of the
    results of the calls ``ids`` names."""
    named: dict[str, int] = {}
    for holder, field in _results(messages, ids, named):
        if field in holder:  # a result may have none (Anthropic's tool_result without content)
            holder[field] = _printed(holder[field], 0)


def _calls(messages: list[Any], named: dict[str, int]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for m in messages:
        if m.__class__ is not dict:
            continue
        for c in m.get("tool_calls") or ():  # Chat Completions
            if isinstance(c, dict) and isinstance(c.get("function"), dict):
                out.append((_id(c.get("id")), _text(c["function"].get("arguments"), 0)))
        kind = m.get("type")
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):  # Responses
            args = m.get("arguments", m.get("input", m.get("action")))
            out.append((_id(m.get("call_id")), _text(args, 0)))
        for block in _blocks(m):
            if block.get("type") in ("tool_use", "server_tool_use"):  # Messages
                out.append((_id(block.get("id")), _text(block.get("input"), 0)))
            call = block.get("functionCall")  # Gemini
            if isinstance(call, dict):
                out.append((_gemini_id(call, named), _text(call.get("args"), 0)))
    return out


def _results(
    messages: list[Any], ids: set[str], named: dict[str, int]
) -> list[tuple[dict[str, Any], str]]:
    out: list[tuple[dict[str, Any], str]] = []
    for m in messages:
        if m.__class__ is not dict:
            continue
        if m.get("role") == "tool" and _id(m.get("tool_call_id")) in ids:
            out.append((m, "content"))
        if str(m.get("type", "")).endswith("call_output") and _id(m.get("call_id")) in ids:
            out.append((m, "output"))
        for block in _blocks(m):
            if block.get("type") == "tool_result" and _id(block.get("tool_use_id")) in ids:
                out.append((block, "content"))
            answer = block.get("functionResponse")
            if isinstance(answer, dict) and _gemini_id(answer, named) in ids:
                out.append((answer, "response"))
    return out


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    held: list[Any] = []
    for field in ("content", "parts"):
        blocks = message.get(field)
        if isinstance(blocks, list):
            held += blocks
    return [b for b in held if b.__class__ is dict]


def _id(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _gemini_id(part: dict[str, Any], named: dict[str, int]) -> str:
    if isinstance(part.get("id"), str) and part["id"]:
        return str(part["id"])
    name = str(part.get("name", ""))
    n = named.get(name, 0)
    named[name] = n + 1
    return f"{name}#{n}"


def _text(value: Any, depth: int) -> str:
    """The strings ``value`` holds, joined by newlines, 4 KiB at most."""
    if isinstance(value, str):
        return value[:_CALL_TEXT]
    if depth >= _MAX_DEPTH:
        return ""
    if isinstance(value, dict):  # a field's name too: a read tool's ``"file_path": "…"``
        items: Any = value.items()
    else:
        items = enumerate(value) if isinstance(value, list) else ()
    out: list[str] = []
    size = 0
    for k, v in items:
        s = _text(v, depth + 1)
        s = f'"{k}": "{s}"' if isinstance(k, str) and isinstance(v, str) else s
        out.append(s)
        size += len(s) + 1
        if size >= _CALL_TEXT:
            break
    return "\n".join(out)


def _printed(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return _printed_text(value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, list):
        return [_printed(v, depth + 1) for v in value]
    if isinstance(value, dict):
        keep = ("type", "tool_use_id", "call_id", "id", "name")  # a block's fields, not output
        return {k: v if k in keep else _printed(v, depth + 1) for k, v in value.items()}
    return value


def _printed_text(text: str) -> str:
    if len(text) > _RESULT_TEXT:
        return text
    head, sep, body = text.partition(_CODEX_OUTPUT)
    if not sep:
        head, body = "", text
    lines = body.split("\n")
    alone: list[tuple[int, re.Match[str]]] = []
    for i, line in enumerate(lines):
        m = _ALONE.fullmatch(line)
        if m is None:
            continue
        word = m["word"]
        if word.lower() in _KEPT_WORDS or word.startswith(REDACTED) or _tag(word):
            continue
        alone.append((i, m))
        if len(alone) > _MAX_ALONE:  # a listing (packages, hashes, files), not a secret printed
            return text
    for i, m in alone:
        line = lines[i]
        lines[i] = line[: m.start("word")] + REDACTED + line[m.end("word") :]
    return head + sep + "\n".join(lines)


def _tag(word: str) -> bool:
    """Markup around the output (``<output>``, ``</returncode>``), not a value."""
    return word.startswith("<") and word.endswith(">")
