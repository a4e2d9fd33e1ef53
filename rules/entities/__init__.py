"""Recent entities and semantic pointers: the ``track_entities`` rule (what calls created,
deleted, moved: files, folders and entities beyond files), its per-session cache, the opt-in
history restore, the detection of vague references in eight languages, their resolution by kind,
relation and list position, the pointers' wording, and the ``resolve_refs`` rule.

May import ``rules.activity``, ``rules.packs`` and the top-level modules of ``rules``."""
