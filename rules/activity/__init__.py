"""What the agent's tool calls did, read from calls and results: the shell lexer and parser
(effects of ``mkdir``, ``rm``, redirections …), file tools recognised by their argument schema,
observations (one per call and result: kind, target, exit status), build/test diagnostics, and
agent CLIs' own shapes (Codex's output header and ``apply_patch``, argv commands: ``agent_tools``),
and entities beyond files (branches, servers, tables, API objects …) from commands, their output
and structured results (``entity_pack``, ``entity_commands``, ``entity_results``).
Shared by the entity, working-set and pruning rules. Not a rule itself.

May import ``rules.packs`` and the top-level modules of ``rules``."""
