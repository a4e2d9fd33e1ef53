"""The working folder a harness says its agent starts in: Claude Code's system prompt ("Primary
working directory: /home/u/proj", older "Working directory: …"), Codex's
``<environment_context>`` (``<cwd>/home/u/proj</cwd>``). Read where no ``cd`` has set one yet, so
``mkdir reports`` is ``/home/u/proj/reports``, not a relative "reports" a later ``cd /tmp`` would
misread. Only an absolute path; the system messages and the first user messages, each's start."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rules.base import Message
from rules.messages import role, text_of

_SAID = re.compile(
    r"(?:^|\n)[ \t]{0,8}(?:-[ \t]{0,4})?(?:Primary working directory|Working directory):[ \t]{0,8}"
    r"(?P<said>/[^\n]{1,1024})"
    r"|<cwd>(?P<tag>/[^<\n]{1,1024})</cwd>"
)
_READ = 65_536  # characters of each message's start
_USERS = 3  # the first user messages (Codex's context is one of them)


def harness_cwd(messages: Sequence[Message]) -> str | None:
    """The working folder the harness named, or None."""
    users = 0
    for m in messages:
        who = role(m)
        if who == "user":
            users += 1
            if users > _USERS:
                break
        elif who not in ("system", "developer"):
            continue
        text = text_of(m.get("content"))[:_READ]
        # most prompts name no folder: two substring scans, not the pattern at every position
        if "orking directory:" not in text and "<cwd>" not in text:
            continue
        found = _SAID.search(text)
        if found is not None:
            path = (found["said"] or found["tag"] or "").rstrip()
            return path.rstrip("/") or "/"
    return None
