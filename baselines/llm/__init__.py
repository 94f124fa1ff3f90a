"""The LLM floor: model loading, tokens and the one prompt policy, chat templates, scoring, the
value head, and the rollout engines behind one protocol. Imports nothing of ``baselines.rl`` or
``baselines.collapse``."""
