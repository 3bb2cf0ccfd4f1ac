"""Vector instruction sets: what the CPU has, and the flags that use it.

A binary built for AVX-512 dies with SIGILL on a CPU without it, so the level is
detected, never assumed: on Linux from the ``flags`` of ``/proc/cpuinfo`` (what the
kernel enabled, so a CPU whose OS does not save the AVX-512 registers reports none),
elsewhere by compiling and running a small program (:func:`probe_source`). Explicit
``-m`` flags, not ``-march=native``: a cache directory may be shared by machines whose
CPUs differ beyond the level, and the key holds the level, not every feature.

The order of :data:`LEVELS` is the order of preference; :mod:`toolchain` takes the
first one the CPU supports and the compiler accepts. ``benches/cpp_isa.py`` measured
it (one thread, g++ 12, a Sapphire Rapids core): AVX-512 with 512-bit vectors runs a
fused pointwise loop and a row sum 1.2-1.8x faster than AVX2 while the data fits in
L1/L2 (10^3..10^5 floats), the same once memory-bound (10^6..10^7), never slower, and
256-bit AVX-512 is no faster than AVX2; so AVX-512, at 512 bits, where the CPU has it.

>>> features = parse_cpuinfo("processor : 0\\nflags : fpu sse2 avx2 fma f16c\\n")
>>> [level.value for level in supported_levels(features, "x86_64")]
['avx2', 'none']
>>> LEVELS[VectorLevel.AVX2].flags
('-mavx2', '-mfma', '-mf16c')
"""
from __future__ import annotations

import enum
import platform
from dataclasses import dataclass
from pathlib import Path


class VectorLevel(enum.Enum):
    """A vector instruction-set level; the value is the ``FASTDYNAMO_CPP_ISA`` spelling."""

    AVX512 = "avx512"
    AVX2 = "avx2"
    NONE = "none"


@dataclass(frozen=True)
class LevelSpec:
    """What a level needs from the CPU (``/proc/cpuinfo`` names) and passes to the compiler.

    ``macros`` are those the flags must define: the probe checks them, so a compiler
    that accepts a flag but ignores it fails the probe instead of a kernel. (The probe
    includes no intrinsics header: parsing ``immintrin.h`` alone costs g++ 0.2 s, and
    its vectorised loop already makes the assembler encode the level's instructions.)
    """

    cpu_features: frozenset[str]
    flags: tuple[str, ...]
    macros: tuple[str, ...]

    def probe(self) -> str:
        """Preprocessor lines that fail unless the flags took effect.

        >>> print(LEVELS[VectorLevel.AVX2].probe())
        #if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
        #error the level's flags did not take effect
        #endif
        <BLANKLINE>
        """
        if not self.macros:
            return ""
        condition = " || ".join(f"!defined({macro})" for macro in self.macros)
        return f"#if {condition}\n#error the level's flags did not take effect\n#endif\n"


_AVX2_FEATURES = frozenset({"avx2", "fma", "f16c"})
_AVX2_MACROS = ("__AVX2__", "__FMA__", "__F16C__")

LEVELS: dict[VectorLevel, LevelSpec] = {
    # F/DQ/VL/BW: the Skylake-server set every AVX-512 CPU since (and Zen 4) has.
    VectorLevel.AVX512: LevelSpec(
        _AVX2_FEATURES | {"avx512f", "avx512dq", "avx512vl", "avx512bw"},
        ("-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mavx2", "-mfma", "-mf16c",
         # The measured default: 512-bit vectors; GCC's generic tuning would pick 256.
         "-mprefer-vector-width=512"),
        ("__AVX512F__", "__AVX512DQ__", "__AVX512VL__", "__AVX512BW__", *_AVX2_MACROS)),
    VectorLevel.AVX2: LevelSpec(_AVX2_FEATURES, ("-mavx2", "-mfma", "-mf16c"), _AVX2_MACROS),
    VectorLevel.NONE: LevelSpec(frozenset(), (), ()),
}
# The levels above use x86 flags; elsewhere (aarch64: NEON is baseline) only NONE.
_X86_MACHINES = frozenset({"x86_64", "amd64", "i686", "i386"})
ALL_FEATURES = frozenset().union(*(spec.cpu_features for spec in LEVELS.values()))


def parse_cpuinfo(text: str) -> frozenset[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` text (the first ``flags`` line)."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def cpuinfo_features(path: Path = Path("/proc/cpuinfo")) -> frozenset[str] | None:
    """The flags of ``/proc/cpuinfo``, or None where there is none (not Linux)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return parse_cpuinfo(text) or None


def supported_levels(features: frozenset[str], machine: str | None = None) -> list[VectorLevel]:
    """The levels a CPU with ``features`` runs, best first; NONE is always last."""
    if (machine or platform.machine()).lower() not in _X86_MACHINES:
        return [VectorLevel.NONE]
    return [level for level, spec in LEVELS.items() if spec.cpu_features <= features]


# __builtin_cpu_supports checks the OS saves the registers too (xgetbv), as the kernel's
# flags do. Clang 14 does not know "f16c": it is read from CPUID leaf 1 (ECX bit 29).
_BUILTIN_CHECKS = {feature: f'__builtin_cpu_supports("{feature}")' for feature in ALL_FEATURES - {"f16c"}}
_BUILTIN_CHECKS["f16c"] = "(__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)))"


def probe_source() -> str:
    """A program that prints, one a line, each feature of :data:`ALL_FEATURES` the CPU has
    (for machines without ``/proc/cpuinfo``; see :func:`parse_probe_output`)."""
    checks = "".join(f'  if ({_BUILTIN_CHECKS[name]}) std::puts("{name}");\n' for name in sorted(ALL_FEATURES))
    return ("#include <cpuid.h>\n#include <cstdio>\nint main() {\n  unsigned a, b, c, d;\n"
            f"  __builtin_cpu_init();\n{checks}  return 0;\n}}\n")


def parse_probe_output(stdout: str) -> frozenset[str]:
    """The features :func:`probe_source`'s program printed."""
    return frozenset(stdout.split()) & ALL_FEATURES
