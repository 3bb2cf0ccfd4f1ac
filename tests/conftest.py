"""Fixtures shared by the test suite, and the hypothesis profiles: ``ci`` (the default)
runs a few hundred generated programs; select thousands with ``--hypothesis-profile=long``,
fewer with ``versions`` (CI's extra CPython versions).
The environment (Triton's interpreter, strict errors, a fresh kernel cache, the native
extension loaded) is set by the repository's root ``conftest.py``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import child_python
import pytest
import torch
from hypothesis import HealthCheck, settings

import fastdynamo
from fastdynamo import logs

settings.register_profile("ci", max_examples=150, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
# CI's runs on the extra CPython versions (3.12, 3.13; see .ci/run): fewer examples.
settings.register_profile("versions", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

@pytest.fixture(autouse=True)
def no_internal_errors(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test fails on a compiler error raised in strict mode, even one the test did
    not see (it can raise the same exception as the user's program, which a comparison
    with eager then takes for the program's); tests about internal errors are marked
    ``internal_errors``."""
    from fastdynamo.convert_frame import STRICT_INTERNAL_ERRORS

    STRICT_INTERNAL_ERRORS.clear()
    yield
    if request.node.get_closest_marker("internal_errors") is None:
        assert not STRICT_INTERNAL_ERRORS, STRICT_INTERNAL_ERRORS
    STRICT_INTERNAL_ERRORS.clear()


class FreshCache:
    """What :func:`fresh_cache` gives a test: ``disk()`` points ``FASTDYNAMO_CACHE_DIR``
    at a new, empty directory for this test only and returns it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
        self._monkeypatch = monkeypatch
        self._tmp_path_factory = tmp_path_factory

    def disk(self) -> Path:
        path = self._tmp_path_factory.mktemp("fastdynamo-cache")
        self._monkeypatch.setenv("FASTDYNAMO_CACHE_DIR", str(path))
        return path


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreshCache]:
    """An empty compile cache (``fastdynamo.reset()``) before and after the test; the grad
    mode and logs a failing test leaves behind are restored. Use it in a module with
    ``pytestmark = pytest.mark.usefixtures("fresh_cache")``, or take it as an argument
    and call ``fresh_cache.disk()`` for a fresh on-disk kernel cache as well."""
    fastdynamo.reset()
    mode = torch.is_grad_enabled()
    yield FreshCache(monkeypatch, tmp_path_factory)
    fastdynamo.reset()
    torch.set_grad_enabled(mode)
    logs.set_logs("")


@pytest.fixture
def subprocess_env(tmp_path: Path):
    """Build the environment for a child Python process (``subprocess.run([sys.executable,
    ...], env=subprocess_env())``): it imports the same fastdynamo as this process, runs
    kernels in Triton's interpreter with strict errors (``interpreter=False`` leaves both
    unset, as on a machine without them) and writes kernels to ``cache_dir`` (default: this
    test's ``tmp_path``). Keyword arguments add or override variables."""
    def build(*, interpreter: bool = True, cache_dir: Path | None = None, **overrides: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "FASTDYNAMO_TRITON_STRICT")}
        if interpreter:
            env.update(TRITON_INTERPRET="1", FASTDYNAMO_TRITON_STRICT="1")
        env["FASTDYNAMO_CACHE_DIR"] = str(cache_dir if cache_dir is not None else tmp_path)
        python_path = child_python.python_path()
        if python_path:
            env["PYTHONPATH"] = python_path
        else:
            env.pop("PYTHONPATH", None)
        env.update(overrides)
        return env

    return build
