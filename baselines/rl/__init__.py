"""The RL floor: pure tensor functions (advantages, losses, the padded batch, mini-batches, SNR-Aware
Filtering and its "no gradient" predicates), as verl's ``core_algos``. Imports nothing else of
``baselines``."""
