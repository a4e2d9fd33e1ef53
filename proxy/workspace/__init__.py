"""The workspace bootstrap of a sidecar proxy sharing the agent's workspace (``workspace.root``,
opt-in): a picture of the project read from disk, read-only and bounded (``picture``, through
``safe_fs``), taken off the event loop and handed to a session's first requests as a hint
(``pictures``). Imports ``proxy.workspace_settings`` and ``rules`` only."""
