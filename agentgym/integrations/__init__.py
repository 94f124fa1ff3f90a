"""Bridges from agentgym environments to other training libraries (each imported on demand).

* :mod:`agentgym.integrations.trl`: Hugging Face TRL's ``GRPOTrainer`` (``pip install
  'agentgym[trl]'``).
"""
