"""A line of the injected block made of text the agent or a tool wrote (a path, a name, a goal, a
failure's message): kept on one line, the block's own tag in it made inert. A line break would
start a line of the block's own (a forged reference, a "SYSTEM:" line), and a closing tag would
end the block, so what follows would read as outside ctxproxy's note."""

from __future__ import annotations

_FOLDED = str.maketrans({c: "⏎" for c in "\n\r\x0b\x0c\x85\u2028\u2029"})
_TAG = "ctxproxy-context"


def one_line(text: str) -> str:
    """``text`` on one line, the block's own tag in it made inert (``<`` as ``‹``)."""
    text = text.translate(_FOLDED)
    return text.replace("<", "‹") if _TAG in text else text
