"""The environment every test and doctest runs in, set before anything imports triton.

At the repository root so that it covers both ``tests/`` and the package's docstrings
(``--doctest-modules`` over ``fastdynamo``, see pyproject.toml); fixtures are in
``tests/conftest.py``.

- Triton kernels (the default backend) run in Triton's interpreter on CPU tensors; the
  flag must be set before triton is first imported (the first capture imports it
  through torch).
- Internal errors of the kernel generators raise instead of falling back to ATen, and
  compiler errors of the frame callback raise instead of running the frame as Python,
  so a bug cannot pass as a fallback.
- Generated kernels go to a fresh cache directory for the session, never ~/.cache.
- The native extension is imported here: a missing or mismatched build fails the run
  at once, with how to build it, instead of failing (or skipping) tests one by one.
- A doctest's changes to the environment are undone after it (the kernel cache's example
  points FASTDYNAMO_CACHE_DIR at a new directory).
"""
from __future__ import annotations

import os
import sys
import tempfile

import pytest
from _pytest.doctest import DoctestItem

if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError(
        "the tests need TRITON_INTERPRET=1 before triton is imported, but a plugin imported "
        "triton first; run with `TRITON_INTERPRET=1 python -m pytest`"
    )
os.environ["TRITON_INTERPRET"] = "1"
os.environ["FASTDYNAMO_TRITON_STRICT"] = "1"
os.environ["FASTDYNAMO_KERNELS_STRICT"] = "1"
# The default backend keeps its kernels instead of timing them against ATen ops: a
# test's graphs compile the same way on a loaded machine (tests/cpp/test_choice.py
# covers the measurement).
os.environ["FASTDYNAMO_KERNELS_CHOICE"] = "kernels"
os.environ["FASTDYNAMO_CACHE_DIR"] = tempfile.mkdtemp(prefix="fastdynamo-tests-")

import fastdynamo  # noqa: E402
from fastdynamo._runtime import NativeRuntimeError, native  # noqa: E402

try:
    native()
except NativeRuntimeError as err:
    raise NativeRuntimeError(
        f"the test suite needs fastdynamo's native extension, and {fastdynamo.__file__} has none "
        f"that loads ({err}; cause: {err.__cause__}). Build it: `make build-dev` and run with "
        "PYTHONPATH=python, or `pip install .`"
    ) from err

fastdynamo.config.fallback_on_internal_error = False


class _RestoreEnvironmentAfterDoctests:
    """A plugin, not a conftest hook: conftest hooks do not reach the doctests of an
    installed package (collected from site-packages, outside this directory)."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if isinstance(item, DoctestItem):
            self.saved = dict(os.environ)

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        if isinstance(item, DoctestItem):
            os.environ.clear()
            os.environ.update(self.saved)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_RestoreEnvironmentAfterDoctests(), "fastdynamo-doctest-environment")
