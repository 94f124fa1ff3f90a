"""The local agentgym leaderboard: replay-verified submissions stored in SQLite.

``python -m leaderboards submit run.json --name NAME`` checks a result bundle written by
``agentgym eval`` (size, JSON, the schema in ``leaderboards/schema/bundle-v1.json``), replays every
episode from its seed and actions (:mod:`leaderboards.verify`), and stores it
(:mod:`leaderboards.store`); ``show`` and ``render`` print and publish the ranked tables
(:mod:`leaderboards.render`). See ``leaderboards/README.md``.
"""
