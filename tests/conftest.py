"""Shared pytest setup: the Triton environment (set before anything imports triton) and
hypothesis profiles: ``ci`` (the default) runs a few hundred generated programs; select
thousands with ``--hypothesis-profile=long``, fewer with ``versions`` (CI's extra CPython
versions).
"""
import os
import tempfile

# Every test selection runs in the same environment: Triton kernels (the default backend)
# run in Triton's interpreter on CPU tensors, which must be chosen before triton is first
# imported (the first capture imports it through torch). Internal errors of the Triton
# backend raise instead of falling back to ATen, and generated kernels go to a fresh cache.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("FASTDYNAMO_TRITON_STRICT", "1")
os.environ.setdefault("FASTDYNAMO_CACHE_DIR", tempfile.mkdtemp(prefix="fastdynamo-tests-"))

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile("ci", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# CI's runs on the extra CPython versions (3.12, 3.13; see .ci/run): fewer examples.
settings.register_profile("versions", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# Compiler bugs must fail tests, not fall back to Python silently.
import fastdynamo.config  # noqa: E402

fastdynamo.config.fallback_on_internal_error = False
