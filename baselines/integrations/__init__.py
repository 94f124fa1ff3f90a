"""Bridges from agentgym environments to other training libraries (each imported on demand).

* :mod:`baselines.integrations.trl`: Hugging Face TRL's ``GRPOTrainer`` (``pip install
  'agentgym[trl]'``) on the agentgym episode loop, with RAGEN-2's filter and diagnostics.
* :mod:`baselines.integrations.trl_recipe`: its command-line entry point, for
  ``accelerate launch`` with ``baselines/configs/trl/*.yaml`` (multi-GPU; untested here).
"""
