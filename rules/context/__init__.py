"""What the model gets to see: the ``working_set`` ledger, the ``prune`` rule with its stages,
its overlay (edits replayed byte for byte) and protected evidence, the ``inject`` block, and
``measure`` (per-section sizes).

May import ``rules.activity``, ``rules.entities`` (the entity cache and the
references' wording, for the injected block) and
the top-level modules of ``rules``."""
