"""``python -m agentgym ...``: the same command line as the ``agentgym`` script."""

from agentgym.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
