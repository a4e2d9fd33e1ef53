"""Values that say where a secret is kept, not the secret, for ``rules.redact``: code that
reads one (``os.environ['GITHUB_TOKEN']``, ``os.getenv("HF_TOKEN")``, ``getpass.getpass()``,
``input("pw: ")``, ``process.env.OPENAI_API_KEY``, ``settings.SECRET_KEY``) and a shell's
variable named as a secret (``$DB_PASSWORD``, ``${API_KEY:-}``). Redacted, the code shown to the
model (the working set's blocks, a replayed command) read ``token = [REDACTED]'GITHUB_TOKEN']``,
which is neither the code nor a secret. A bare value only: a quoted one is a literal."""

from __future__ import annotations

import re

from rules.redact_names import is_secret_name

_CHAIN = r"[A-Za-z_]\w{0,63}(?:\.[A-Za-z_]\w{0,63}){0,7}"
# a call or an index whose argument is quoted (the bare value stops at the quote)
_OPENS = re.compile(rf"{_CHAIN}[(\[]")
_CALLED = re.compile(rf"{_CHAIN}\(\)")  # a call with no argument: getpass.getpass()
_DOTTED = re.compile(rf"{_CHAIN}\.(?P<last>[A-Za-z_]\w{{0,63}})")
_SHELL = re.compile(
    r"\$(?:(?P<bare>[A-Za-z_]\w{0,63})|\{(?P<braced>[A-Za-z_]\w{0,63})(?:[:?+\-=][^}]{0,64})?\})"
)


def names_where_kept(text: str, start: int, end: int) -> bool:
    """Whether the bare value ``text[start:end]`` is code reading a secret or a shell variable
    named as one, not a secret."""
    if _CALLED.fullmatch(text, start, end):
        return True
    if _OPENS.fullmatch(text, start, end):  # its argument quoted (escaped, in JSON, too)
        after = text[end : end + 9].lstrip("\\")
        return after[:1] in ("'", '"')
    dotted = _DOTTED.fullmatch(text, start, end)
    if dotted is not None:
        return is_secret_name(dotted["last"])
    shell = _SHELL.fullmatch(text, start, end)
    return shell is not None and is_secret_name(shell["bare"] or shell["braced"])
