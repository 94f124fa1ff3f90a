"""Studies that reproduce published claims with the baselines (one module per study)."""
