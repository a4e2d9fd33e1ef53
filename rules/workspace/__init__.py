"""The workspace as the agent saw it: a bounded map of the folders and files its tool calls listed,
read, wrote, created, moved and deleted, the git branch and dirty files, and the project's
manifests (``workspace_map``); its part that matters for the working-set block (``render``); and
the bootstrap picture a sidecar proxy may read from disk (built in ``proxy.workspace``, handed in
as a hint, kept here).

Imports ``rules.activity``, ``rules.base``, ``rules.messages``, ``rules.redact`` and
``rules.report`` only; no disk access (the rules are pure)."""
