"""Shared pytest setup: hypothesis profiles.

``ci`` (the default) runs a few hundred generated programs; select thousands with
``--hypothesis-profile=long``.
"""
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# Compiler bugs must fail tests, not fall back to Python silently.
import fastdynamo.config  # noqa: E402

fastdynamo.config.fallback_on_internal_error = False
