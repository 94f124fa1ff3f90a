"""Reference agents and the LLM layer of agentgym (RAGEN-2 baselines).

The LLM layer: model loading (:mod:`baselines.llm.policy`), torch threads (:mod:`baselines.llm.threads`),
engines, the ``hf:`` agent of ``agentgym eval`` (:mod:`baselines.hf_agent`), the trainer, SFT and
the TRL integration (:mod:`baselines.integrations.trl`). This package uses ``agentgym``;
``agentgym`` never imports it (it finds the ``hf:`` agent through a string entry point,
:data:`agentgym.agents.AGENT_ENTRY_POINTS`).

Importing this package sets ``OMP_WAIT_POLICY=PASSIVE`` before torch loads, unless the user set
it (:func:`agentgym.threads.set_omp_wait_policy`): every entry point (``python -m
baselines.train``, ``baselines.sft``, ``baselines.evaluate``, the ``hf:`` agent) passes here first.
"""

from agentgym.threads import set_omp_wait_policy as _set_omp_wait_policy

_set_omp_wait_policy()
