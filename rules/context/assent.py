"""A user's turn that only says yes ("yes", "ok, go ahead", "sí, adelante", "はい、続けて",
"好的", "네"): an answer to the agent's question, not an instruction. The working set keeps the
instruction it answered rather than "Latest instruction: yes".

Read by words: the text, at most ``MAX_CHARS`` characters, split at blanks and punctuation, is
assent when every word is one of ``WORDS`` (at most ``MAX_WORDS`` of them). No pattern runs over
the text: linear."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

MAX_CHARS = 40
MAX_WORDS = 5
_SPLIT = re.compile(r"[\s,.;:!?…，、。；：！？~～]+")
WORDS = frozenset(
    (
        # English
        "yes", "y", "yeah", "yep", "yup", "ok", "okay", "k", "sure", "go", "ahead", "on",
        "continue", "proceed", "please", "do", "it", "that", "sounds", "good", "great", "fine",
        "lgtm", "thanks", "thank", "you", "right", "correct", "agreed", "perfect", "cool",
        # Spanish, French, German, Portuguese
        "sí", "si", "vale", "dale", "adelante", "claro", "continúa", "continua", "oui",
        "d'accord", "vas-y", "allez", "continue", "ja", "klar", "weiter", "mach", "sim", "pode",
        "continua", "beleza",
        # Chinese, Japanese, Korean
        "好", "好的", "是", "是的", "要", "可以", "行", "对", "继续", "嗯", "好吧", "没问题",
        "はい", "ええ", "うん", "お願いします", "続けて", "どうぞ", "オーケー",
        "네", "예", "응", "좋아", "좋아요", "계속", "계속해", "진행해", "그래",
    )
)  # fmt: skip


def is_assent(text: str) -> bool:
    """Whether ``text`` only says yes (see the module's docstring)."""
    if not text or len(text) > MAX_CHARS:
        return False
    words = [w for w in _SPLIT.split(text.lower()) if w]
    return 0 < len(words) <= MAX_WORDS and all(w in WORDS for w in words)


MAX_ASSENTS = 8  # user turns looked back through for what a run of "yes" answered


def answered(
    messages: Sequence[Any],
    at: int,
    is_users_turn: Callable[[Any], bool],
    text_of: Callable[[Any], str],
) -> str | None:
    """The text of the user's latest own turn before ``at`` that is more than assent, within
    ``MAX_ASSENTS`` of the user's turns; None if there is none."""
    looked = 0
    for i in range(at - 1, -1, -1):
        if not is_users_turn(messages[i]):
            continue
        text = text_of(messages[i])
        if not is_assent(text):
            return text
        looked += 1
        if looked >= MAX_ASSENTS:
            break
    return None
