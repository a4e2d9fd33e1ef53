"""The tool chain: the validator (the same checks run as the final integrity check and in the
tests), and the ``repair_tool_chain`` rule with its parts (calls and ids, the rebuild of a broken
history, orphan text).

May import the top-level modules of ``rules`` (``matching`` for drifted ids)."""
