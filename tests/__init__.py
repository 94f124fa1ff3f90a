"""The agentgym test suite (a package, so that ``python -m tests.golden_update`` works)."""
