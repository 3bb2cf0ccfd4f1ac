"""The package version, in a module of its own so that :mod:`fastdynamo._runtime` can
check the native extension against it without importing the package's public API."""

__version__ = "0.1.0"
