"""The suite's Hypothesis profile: no per-example deadline and no too_slow health check, since
CI runs on a busy 2-core machine where wall time says nothing about the code (speed is measured
in benchmarks/, never asserted). A test's own ``@settings`` add to this profile."""

from hypothesis import HealthCheck, settings

settings.register_profile("agentgym", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("agentgym")
