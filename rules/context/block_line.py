"""A line of the injected block made of text the agent or a tool wrote (a path, a name, a goal, a
failure's message): kept on one line, the block's own tag in it made inert. A line break would
start a line of the block's own (a forged reference, a "SYSTEM:" line), and a closing tag would
end the block, so what follows would read as outside ctxproxy's note. Control characters and the
invisible ones that reorder or hide text (bidirectional overrides, zero-width marks) go too: the
line must read as the model will read it."""

from __future__ import annotations

_FOLDED = {c: "⏎" for c in "\n\r\x0b\x0c\x85\u2028\u2029"}
_TAB = {"\t": " "}
_C0_DEL_C1 = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
_BIDI = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ZERO_WIDTH = [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF]
_CONTROLS = dict.fromkeys([*_C0_DEL_C1, *_BIDI, *_ZERO_WIDTH])
_TABLE = str.maketrans({**_CONTROLS, **{ord(k): v for k, v in (_FOLDED | _TAB).items()}})
_TAG = "ctxproxy-context"


def one_line(text: str) -> str:
    """``text`` on one line, without control or invisible characters, the block's own tag in
    it made inert (``<`` as ``‹``)."""
    text = text.translate(_TABLE)
    return text.replace("<", "‹") if _TAG in text else text
