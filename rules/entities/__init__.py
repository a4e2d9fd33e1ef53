"""Recent entities and semantic pointers: the ``track_entities`` rule (what calls created,
deleted, moved), its per-session cache, the opt-in history restore, the detection of vague
references in four languages, and the ``resolve_refs`` rule.

May import ``rules.activity``, ``rules.packs`` and the top-level modules of ``rules``."""
