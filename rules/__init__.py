"""Pure pipeline rules. See rules/base.py for the interface and rules/registry.py for the order."""
