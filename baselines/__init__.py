"""Reference agents and the LLM layer of agentgym (RAGEN-2 baselines).

Importing this package sets ``OMP_WAIT_POLICY=PASSIVE`` before torch loads, unless the user set
it (:func:`agentgym.threads.set_omp_wait_policy`): every entry point (``python -m
baselines.train``, ``baselines.sft``, ``baselines.evaluate``, the ``hf:`` agent) passes here first.
"""

from agentgym.threads import set_omp_wait_policy as _set_omp_wait_policy

_set_omp_wait_policy()
