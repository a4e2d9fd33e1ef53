"""YAML read as ``yaml.safe_load`` reads it, but a key given twice in one mapping is an error:
safe_load keeps the last one, so a second ``upstreams:`` appended to a config replaced the first
(every model then went where only the appended block said) with no word of it."""

from __future__ import annotations

from typing import Any

import yaml


class DuplicateKey(yaml.YAMLError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in seen:
                    line = key_node.start_mark.line + 1
                    first = seen[key].start_mark.line + 1
                    said = f"line {line}: {key!r} is given twice (first at line {first})"
                    raise DuplicateKey(said)
                seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def load_unique(text: str, name: str | None = None) -> Any:
    """``text`` as YAML (``name``: the file it came from, as its errors say, with the line and
    its caret as for any text); raises ``DuplicateKey`` (a ``yaml.YAMLError``) for a key given
    twice."""
    loader = _UniqueKeyLoader(text)
    if name:
        loader.name = name  # read by each mark as it is made (a str's is "<unicode string>")
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
