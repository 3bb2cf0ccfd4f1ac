"""The C++ backend's toolchain: generated C++ source -> a loaded shared library.

:mod:`compiler` finds the C++ compiler (``$CXX``, else ``c++``, ``g++``, ``clang++``),
:mod:`isa` the vector instruction set the CPU and the compiler both support,
:mod:`openmp` how to link so that the process keeps the one OpenMP runtime torch
loaded, :mod:`toolchain` probes them once per process into a :class:`Toolchain`
(compiler, flags, ISA), and :mod:`binary_cache` compiles source to
``<cache dir>/cpp/<key>.so`` and loads it with ctypes. No backend is registered yet.
"""
