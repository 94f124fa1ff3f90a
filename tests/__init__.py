"""The agentgym test suite (a package, so that ``python -m tests.golden_update`` works).

pytest imports this file before any test module loads torch: the suite runs under the OpenMP wait
policy of the entry points (:func:`agentgym.threads.set_omp_wait_policy`; a user's value is kept),
and ``baselines`` has no reason to warn that torch loaded first.
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
