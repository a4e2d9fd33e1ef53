"""Loops in an agent's recent history, and the note that breaks them: ``detect`` (repeated
failures, no-progress repeats, oscillation, read from the tool calls and their results),
``receipts`` (for a citation or lookup miss, the candidates the history holds and the tolerant
matcher's near miss), ``note`` (the escalating note and its placing inside a tool result) and the
``break_loops`` rule, which keeps its notes per session and replays them byte for byte.

May import ``rules.activity``, ``rules.context`` (the overlay's anchors) and the top-level modules
of ``rules``."""
