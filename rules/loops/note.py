"""The note that breaks a loop, and its placing inside the repeated tool result.

The note escalates with the count (3, 5, 8, 13 … from ``min_count``): it says how many times and
since which message, quotes the error once, lists the receipts of a lookup miss and ends with the
smallest change of approach. It is wrapped like inject's blocks (``INJECT_OPEN`` … ``INJECT_CLOSE``)
so ``measure`` counts it as the proxy's own text and no rule reads it as tool output. From
``elide_from`` on, a body the same as the repeat before it is elided to its first and last lines.
Rendering is a pure function of the message and the stored entry: the same bytes every time."""

from __future__ import annotations

import re

from rules.activity.observations import load_arguments
from rules.base import Message
from rules.loops.detect import Loop
from rules.loops.receipts import Receipts, difference
from rules.messages import INJECT_CLOSE, INJECT_OPEN, PLACEHOLDER_PREFIX, text_of, with_content
from rules.redact import redact_text

HEAD = "Loop detected"
MARK = f"{INJECT_OPEN}\n{HEAD}"
EDIT_ADVICE = (
    "re-read the file and copy the exact text to replace (indentation included), or replace a "
    "smaller unique snippet"
)
# (error pattern, the smallest change of approach); the first that matches the error line wins
ADVICE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.I), a)
    for p, a in (
        (r"old_string|string to replace|did not appear verbatim|no match found for", EDIT_ADVICE),
        (r"command not found|is not recognized as",
         "the program is not installed here: check with `which`, install it, or use another"),
        (r"modulenotfounderror|no module named|cannot find module",
         "install the missing module or fix the import path before running it again"),
        (r"syntax ?error|indentationerror|parse error|unexpected token",
         "fix the syntax error at the line it names first"),
        (r"permission denied|eacces|not permitted",
         "change the path or its permissions, or ask the user"),
        (r"no such file|does not exist|enoent|not found",
         "list the folder or search for the name, and use what that shows"),
        (r"invalid|validation|required|malformed|jsondecodeerror|unexpected keyword",
         "the arguments are rejected: compare them with the tool's schema and change them"),
        (r"timed? ?out", "run a smaller piece, or in the background with a time limit"),
    )
)  # fmt: skip


# a line of a numbered file view (``cat -n``: "   316\t", Claude Code's Read: "   316→")
_NUMBERED = re.compile(r"^[ \t]{0,8}\d{1,7}(?:\t|→)")
OLD_TEXT_KEYS = ("old_str", "old_string", "old_text")


def old_text_hint(arguments: str) -> str:
    """What is wrong with an edit's text to replace, when its own shape shows it: lines that
    start with a numbered view's line numbers, or a backslash and an n written where there is no
    line break. "" when neither (the file's text is not known here)."""
    args = load_arguments(arguments)
    old = next((args[k] for k in OLD_TEXT_KEYS if isinstance(args.get(k), str)), "")
    lines = old[:20_000].split("\n")[:50]
    numbered = [ln for ln in lines if _NUMBERED.match(ln[:40])]
    if numbered and len(numbered) * 2 >= len(lines):
        shown = numbered[0][:40].split("\t")[0].split("→")[0].strip()
        return (
            f"The text to replace starts its lines with line numbers (`{shown}` …) as the "
            "numbered view showed them: the file does not hold them, leave them out."
        )
    if "\n" not in old and "\\n" in old:
        return (
            "The text to replace has `\\n` as two characters (a backslash and an n) and no line "
            "break: write the line break itself."
        )
    return ""


def thresholds(first: int) -> list[int]:
    """Counts where the note escalates: ``first``, ``first + 2``, then each the sum of the two
    before (3, 5, 8, 13, 21 … from 3)."""
    out = [first, first + 2]
    while out[-1] < 10_000:
        out.append(out[-1] + out[-2])
    return out


def level(count: int, first: int) -> int:
    """1 from ``first``, 2 from the next threshold, …"""
    return sum(count >= t for t in thresholds(first))


def _quote(text: str, limit: int = 200) -> str:
    # redacted before the cut (and before lines are joined), which could leave a secret
    # unrecognisable to the note's own redaction
    one = " ".join(redact_text(text).split())
    one = one if len(one) <= limit else one[: limit - 1] + "…"
    return "`" + one.replace("`", "'") + "`"


def _advice(loop: Loop, error: str, receipts: Receipts | None) -> str:
    if receipts is not None:
        if receipts.near is not None:
            return f"cite {receipts.what} {receipts.near + 1} exactly as listed"
        return f"cite one of the {receipts.what}s above exactly as listed, or check why none fits"
    if loop.kind == "no_progress":
        return "its answer is above and has not changed: use it, and go on to the next step"
    if loop.kind == "oscillation":
        return "switching back and forth fixes nothing: step back and try a different fix"
    if loop.steps[-1].miss:  # its error line may quote the text before saying it is missing
        return EDIT_ADVICE
    for pattern, advice in ADVICE:
        if pattern.search(error[:300]):
            return advice
    return "change something before retrying: the arguments, the code the error names, or the plan"


def text(loop: Loop, receipts: Receipts | None, first: int, since: int) -> str:
    """The note for ``loop`` (``since``: the 1-based message number of its first step)."""
    tail = loop.steps[-1]
    n, lv = loop.count, level(loop.count, first)
    if loop.edits:
        head = (
            f"{n} edits of this file in a row have failed to find the text they replace, since "
            f"message {since}."
        )
    elif loop.kind == "repeated_failure":
        head = f"this exact call has failed the same way {n} times in a row, since message {since}."
    elif loop.kind == "no_progress":
        head = (
            f"this exact {tail.kind} has given the same answer {n} times since message {since}, "
            "and nothing in between could have changed it."
        )
    else:
        head = (
            f"the same {len(loop.cycle)} calls have alternated {n} times since message {since}, "
            "failing the same way each cycle."
        )
    lines = [INJECT_OPEN, f"{HEAD} ({loop.kind}, {n}×): {head}"]
    if loop.kind == "oscillation":
        lines += [f"{i}. {_quote(s.label, 160)}" for i, s in enumerate(loop.cycle, 1)]
    else:
        lines.append(f"Call: {_quote(tail.label, 160)}")
    error = next((s.outcome.error for s in reversed(loop.steps) if s.outcome.error), "")
    if error:
        lines.append(f"Error: {_quote(error)}")
    hint = old_text_hint(tail.arguments) if tail.miss else ""
    if hint:
        lines.append(hint)
    if receipts is not None:
        lines.append(f"The {receipts.what}s this conversation holds:")
        lines += [f"{i}. {_quote(c, 160)}" for i, c in enumerate(receipts.candidates, 1)]
        if receipts.near is not None:
            near = receipts.candidates[receipts.near]
            how = difference(receipts.needle, near)
            lines.append(
                f"Near miss: {receipts.near + 1} is what you cite, {_quote(receipts.needle, 120)}, "
                + (f"but for {how}." if how else "but for case or spacing.")
            )
    advice = _advice(loop, error, receipts)
    if lv >= 3:
        lines.append(
            f"Stop repeating it. Next: {advice}. If no other approach is possible, stop and tell "
            "the user what blocks you."
        )
    elif lv == 2:
        lines.append(f"Do not repeat it unchanged. Next: {advice}.")
    else:
        lines.append(f"Next: {advice}.")
    lines.append(INJECT_CLOSE)
    return "\n".join(lines)


def follow_up(loop: Loop, first: int, noted_at: int) -> str:
    """The note of a repeat whose loop already has a full note at the same escalation (at
    message ``noted_at``): the count and the escalation, pointing at the full note for the call,
    the error, the receipts and what to do instead. Each note is replayed in its result on every
    later request, so a full note at every repeat of a long loop billed them again and again (a
    session repeating one failing call 18 times forwarded 8% more than direct)."""
    say = {1: "", 2: " Do not repeat it unchanged."}.get(
        level(loop.count, first), " Stop repeating it."
    )
    return (
        f"{INJECT_OPEN}\n{HEAD} ({loop.kind}, {loop.count}×): the same again; the note at "
        f"message {noted_at} says what to do instead.{say}\n{INJECT_CLOSE}"
    )


def has_note(message: Message) -> bool:
    """Whether the message already carries a loop note (a request that is this rule's output)."""
    body = text_of(message.get("content"))
    return body.startswith(MARK) or f"\n{MARK}" in body


def elided(body: str) -> str:
    """``body`` with all but its first and last lines replaced by one placeholder line; as it is
    when it has three lines or fewer."""
    lines = body.split("\n")
    if len(lines) <= 3:
        return body
    return "\n".join(
        [lines[0], f"{PLACEHOLDER_PREFIX} {len(lines) - 2} lines elided: as before]", lines[-1]]
    )


def render(message: Message, note: str, elide: bool) -> Message:
    """The tool result with the note appended (after ``elided`` of its text with ``elide``)."""
    content = message.get("content")
    if isinstance(content, list):
        if elide and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            body = elided(text_of(content))
            return with_content(
                message, [{"type": "text", "text": body}, {"type": "text", "text": note}]
            )
        return with_content(message, [*content, {"type": "text", "text": note}])
    body = text_of(content)
    if elide:
        body = elided(body)
    return with_content(message, f"{body}\n\n{note}" if body else note)
