"""Bad input at import: an unsupported Python refuses to import with a clear message
naming the versions that work (3.11, 3.12, 3.13), also for free-threaded builds."""
from __future__ import annotations

import subprocess
import sys

FAKE_VERSION = """
import sys
class FakeVersion(tuple):
    major, minor = {major}, {minor}
sys.version_info = FakeVersion(({major}, {minor}, 0, "final", 0))
import fastdynamo
"""

FAKE_FREE_THREADED = """
import sysconfig
real = sysconfig.get_config_var
sysconfig.get_config_var = lambda name: 1 if name == "Py_GIL_DISABLED" else real(name)
import fastdynamo
"""


def _import_error(subprocess_env, script: str) -> str:
    result = subprocess.run([sys.executable, "-c", script], env=subprocess_env(), capture_output=True,
                            text=True)
    assert result.returncode != 0
    return result.stderr.strip().splitlines()[-1]


def test_older_python_refuses_to_import(subprocess_env):
    assert _import_error(subprocess_env, FAKE_VERSION.format(major=3, minor=10)) == (
        "ImportError: fastdynamo supports CPython 3.11, 3.12, 3.13; this is 3.10")


def test_newer_python_refuses_to_import(subprocess_env):
    assert _import_error(subprocess_env, FAKE_VERSION.format(major=3, minor=14)) == (
        "ImportError: fastdynamo supports CPython 3.11, 3.12, 3.13; this is 3.14")


def test_free_threaded_build_refuses_to_import(subprocess_env):
    this = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert _import_error(subprocess_env, FAKE_FREE_THREADED) == (
        "ImportError: fastdynamo supports CPython 3.11, 3.12, 3.13 with the GIL; this is a "
        f"free-threaded build ({this}t), whose frames and code objects it cannot hook")


def test_this_python_is_supported():
    import fastdynamo

    assert sys.version_info[:2] in fastdynamo.SUPPORTED_PYTHONS


def test_native_version_matches_package(native):
    import fastdynamo

    assert native.runtime_version() == fastdynamo.__version__


def test_child_processes_import_the_package_under_test(subprocess_env):
    # Subprocess tests run the fastdynamo this process imported (in place or installed),
    # with the extension this process loaded.
    import fastdynamo

    script = "import fastdynamo, fastdynamo._native as n; print(fastdynamo.__file__); print(n.__file__)"
    result = subprocess.run([sys.executable, "-c", script], env=subprocess_env(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [fastdynamo.__file__, fastdynamo._native.__file__]
