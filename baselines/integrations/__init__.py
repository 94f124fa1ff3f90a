"""Bridges from agentgym environments to other training libraries (each imported on demand).

* :mod:`baselines.integrations.trl`: Hugging Face TRL's ``GRPOTrainer`` (``pip install
  'agentgym[trl]'``).
"""
