"""Type stubs for ``fastdynamo._native``, the Rust extension (see ``rust/``).

Hand-written from ``rust/module_api.rs``, ``rust/callback.rs``, ``rust/cache.rs``,
``rust/frame_info.rs``, ``rust/guards/``, ``rust/cpu_kernel/`` and ``rust/lib.rs``; kept exact by
``tests/native/test_stubs.py`` (``mypy.stubtest``). See ``docs/architecture.md``.
"""
from collections.abc import Callable, Iterable
from types import CellType, CodeType, FunctionType
from typing import Any, Final, Literal, TypeAlias, final

import torch

__all__ = [
    "runtime_version",
    "set_callback",
    "get_callback",
    "set_code_action",
    "get_code_action",
    "cache_entries",
    "publish_cache_entry",
    "reset",
    "set_recompile_limit",
    "get_recompile_limit",
    "installed_evaluator",
    "_set_passthrough_evaluator",
    "_passthrough_frames",
    "_code_extra_read_in_place",
    "_cpu_kernel_force_python",
    "_cpu_kernel_data_layout",
    "CacheEntry",
    "CpuKernel",
    "DirectCall",
    "Dispatcher",
    "Frame",
    "GuardSet",
    "tensor_layout",
    "RecompileLimitWarning",
    "DEFAULT",
    "SKIP",
    "SKIP_RECURSIVE",
    "RUN_ONLY",
    "REGION_WRAPPER",
    "DEFAULT_RECOMPILE_LIMIT",
]

# ---------------------------------------------------------------------------------------
# Code actions (`cache::Action`) and limits

DEFAULT: Final = 0
"""Look up the cache; compile on a miss if the thread's callback allows."""
SKIP: Final = 1
"""Never intercept this code (its callees still are)."""
SKIP_RECURSIVE: Final = 2
"""Never intercept this code nor anything it calls."""
RUN_ONLY: Final = 3
"""Look up the cache, never compile (set when the recompile limit is reached)."""
REGION_WRAPPER: Final = 4
"""The code of ``fastdynamo.compile``'s wrapper: inside its own region, the wrapped
function is called directly (no wrapper frames)."""
DEFAULT_RECOMPILE_LIMIT: Final = 8

_Action: TypeAlias = Literal[0, 1, 2, 3, 4]

# ---------------------------------------------------------------------------------------
# Guard specs (parsed by `rust/guards/source.rs` and `rust/guards/check.rs`; built by
# `fastdynamo.guards.sources` and `fastdynamo.guards`)

_Source: TypeAlias = (
    tuple[Literal["local"], int, str]  # localsplus index, name
    | tuple[Literal["closure"], int, str]  # index into __closure__, name
    | tuple[Literal["global"], str]
    | tuple[Literal["builtin"], str]
    | tuple[Literal["attr"], _Source, str]
    | tuple[Literal["generic_attr"], _Source, str]  # object.__getattribute__(base, name)
    | tuple[Literal["item"], _Source, Any]  # key: dict lookup for exact dicts, else __getitem__
    | tuple[Literal["type"], _Source]
)
_Dims: TypeAlias = tuple[int | None, ...]
_Constant: TypeAlias = (
    int | float | bool | str | bytes | None | tuple[_Constant, ...] | frozenset[_Constant]
)
_Check: TypeAlias = (
    tuple[Literal["type_is"], type]
    | tuple[Literal["id_is"], object]
    | tuple[Literal["equals"], _Constant]
    | tuple[Literal["len_is"], int]
    | tuple[Literal["is_none"]]
    | tuple[Literal["not_none"]]
    | tuple[Literal["tensor"], torch.Tensor, _Dims, _Dims]  # example, sizes, strides
)
_StateCheck: TypeAlias = (
    tuple[Literal["grad_mode"], bool] | tuple[Literal["default_dtype"], torch.dtype]
)
_Relation: TypeAlias = tuple[Literal["distinct", "same"], tuple[_Source, ...]]  # 2+ sources
_GuardSpec: TypeAlias = (
    tuple[_Source, _Check]
    | tuple[tuple[Literal["torch_state"]], _StateCheck]
    | tuple[tuple[Literal["objects"]], _Relation]
)

# ---------------------------------------------------------------------------------------
# Classes

@final
class GuardSet:
    """A guard tree compiled once from a spec; raises ValueError naming a bad spec."""

    def __new__(cls, specs: Iterable[_GuardSpec]) -> GuardSet: ...
    def check(self, frame: Frame) -> bool:
        """True when every guard passes (fast path, stops at the first failure)."""

    def failure_reason(self, frame: Frame) -> str | None:
        """The first failing guard as text (e.g. ``x.size()[0] == 4, got 8``), or None."""

    def time_check(self, frame: Frame, count: int) -> int:
        """Runs ``check`` ``count`` times; total nanoseconds (benches)."""

    def __len__(self) -> int:
        """Number of specs, torch_state checks included."""

@final
class CacheEntry:
    """One compiled version of a code object: ``code`` runs when ``guards`` pass.

    Constructing one marks ``code`` SKIP (and keeps it SKIP across ``reset()``).
    """

    def __new__(cls, guards: GuardSet, code: CodeType, direct: DirectCall | None = None) -> CacheEntry: ...
    @property
    def guards(self) -> GuardSet: ...
    @property
    def code(self) -> CodeType: ...
    @property
    def direct(self) -> DirectCall | None:
        """The compiled graph a dispatcher calls instead of ``code``, or None."""

    @property
    def hits(self) -> int:
        """Calls that ran this entry."""

    @property
    def misses(self) -> int:
        """Lookups in which this entry's guards failed."""

@final
class DirectCall:
    """A compiled graph and how a dispatcher calls it from a call's bound arguments.

    ``inputs`` are source specs (as guards take them), ``output`` an index into the
    graph's result, a tuple of indices, or None when the graph's result is the frame's
    (a bound method is called as its function with ``__self__`` first); ``fallback`` says whether the transformed code
    reruns the frame as Python when the graph raises (in ``grad_mode``).
    """

    def __new__(
        cls,
        graph: Callable[..., Any],
        inputs: Iterable[_Source],
        output: int | tuple[int, ...] | None,
        fallback: bool,
        grad_mode: bool,
    ) -> DirectCall: ...
    @property
    def graph(self) -> Callable[..., Any]: ...
    @property
    def hits(self) -> int:
        """Calls served by calling the graph directly."""

    @property
    def fallback(self) -> bool: ...

@final
class Dispatcher:
    """What ``fastdynamo.compile`` returns: a vectorcall callable that checks the cache
    entries against the call's arguments and calls an entry's graph directly on a hit.
    Binds like a function; ``functools.update_wrapper`` fills its ``__dict__``."""

    @staticmethod
    def over_function(function: FunctionType, callback: _Callback) -> Dispatcher: ...
    @staticmethod
    def over_module(module: torch.nn.Module, callback: _Callback) -> Dispatcher: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, instance: object, owner: type | None = None, /) -> Any: ...
    @property
    def direct_calls(self) -> int:
        """Calls that called an entry's compiled graph directly."""

    @property
    def code_calls(self) -> int:
        """Calls that ran an entry's transformed code."""

    @property
    def frame_calls(self) -> int:
        """Calls that went through the frame hook (compiling on a miss)."""

    @property
    def target(self) -> FunctionType | torch.nn.Module: ...

@final
class Frame:
    """A snapshot of an intercepted frame, handed to the callback on a cache miss.

    Constructible from Python to check guards in tests; ``f_builtins`` defaults to
    ``builtins.__dict__``.
    """

    def __new__(
        cls,
        code: CodeType,
        localsplus: list[Any],
        f_globals: dict[str, Any],
        f_builtins: dict[str, Any] | None = None,
        closure: tuple[CellType, ...] | None = None,
        f_func: FunctionType | None = None,
    ) -> Frame: ...
    @property
    def f_code(self) -> CodeType: ...
    @property
    def f_func(self) -> FunctionType | None:
        """The function object (None when made from Python without one)."""

    @property
    def f_globals(self) -> dict[str, Any]: ...
    @property
    def f_builtins(self) -> dict[str, Any]: ...
    @property
    def closure(self) -> tuple[CellType, ...] | None:
        """The function's ``__closure__`` or None."""

    @property
    def localsplus(self) -> list[Any]:
        """Argument values in ``co_varnames`` order; an unset slot reads as None."""

    @property
    def f_locals(self) -> dict[str, Any]:
        """Argument name -> value."""

@final
class CpuKernel:
    """A generated CPU kernel, ``extern "C" void k(void* const* buffers, const int64_t* sizes)``,
    called as ``kernel(t0, ..., tN-1, i0, ..., iM-1)`` (positional only; returns None).

    ``address`` is the C function's (``ctypes.cast(lib.k, ctypes.c_void_p).value``),
    ``dtypes`` the declared dtype of each tensor argument, ``int_count`` the number of int
    arguments after them; ``owner`` (the ``ctypes.CDLL``) is kept alive so the library
    stays mapped; with ``release_gil`` the GIL is released while the kernel runs.
    ``buffers[i]`` is ``ti.data_ptr()`` (read in place for ``torch.Tensor`` and
    ``nn.Parameter`` when this torch's layout was verified, else asked of torch);
    ``sizes[j]`` is ``ij`` as an int64. A tensor that is not a strided CPU tensor of its
    declared dtype, or an int argument that is not an int, raises TypeError naming the
    kernel and the position, and the kernel is not called. Sizes and strides are not
    checked: the caller guarantees them. As with ctypes, the address must be a function
    of this ABI that reads no more than it is given::

        add = CpuKernel(ctypes.cast(lib.add, ctypes.c_void_p).value, "add",
                        [torch.float32] * 3, 1, lib)
        add(x, y, out, x.numel())
    """

    def __new__(
        cls,
        address: int,
        name: str,
        dtypes: Iterable[torch.dtype],
        int_count: int,
        owner: object,
        release_gil: bool = False,
    ) -> CpuKernel: ...
    def __call__(self, *args: torch.Tensor | int, **kwargs: Any) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def address(self) -> int:
        """The C function's address."""

    @property
    def dtypes(self) -> tuple[torch.dtype, ...]: ...
    @property
    def int_count(self) -> int: ...
    @property
    def release_gil(self) -> bool: ...
    @property
    def python_reads(self) -> int:
        """Tensor arguments whose address was asked of torch in Python (not read in place)."""

class RecompileLimitWarning(UserWarning):
    """A code object reached the recompile limit and now runs eagerly on cache misses."""

# ---------------------------------------------------------------------------------------
# Functions

_CallbackResult: TypeAlias = CacheEntry | _Action | None
"""None: run normally this time; SKIP / SKIP_RECURSIVE: mark the code; an entry: cache
and run it. Any other value (DEFAULT, RUN_ONLY included) raises TypeError in the frame."""
_Callback: TypeAlias = Callable[[Frame], _CallbackResult]
_CallbackSetting: TypeAlias = _Callback | Literal[False] | None

def runtime_version() -> str:
    """The version this extension was built from."""

def set_callback(callback: _CallbackSetting) -> _CallbackSetting:
    """Sets this thread's callback (None: off, False: run-only, a callable: compile on
    miss) and returns the previous one. Raises TypeError for anything else."""

def get_callback() -> _CallbackSetting:
    """This thread's callback: None, False or the callable."""

def set_code_action(code: CodeType, action: _Action) -> None:
    """Marks ``code`` with an action; ValueError for an unknown action, TypeError if
    ``code`` is not a code object."""

def get_code_action(code: CodeType) -> _Action:
    """The action of ``code`` (DEFAULT when it has no state)."""

def cache_entries(code: CodeType) -> list[CacheEntry]:
    """The cache entries of ``code``, most recently used first."""

def publish_cache_entry(code: CodeType, entry: CacheEntry) -> bool:
    """Adds ``entry`` to the cache of ``code`` unless it is there already or ``code`` is
    at the recompile limit; whether it is there now. The compile callback calls it before
    releasing its lock, so that a concurrent miss finds the entry."""

def reset() -> None:
    """Drops every cache entry and skip mark (transformed code stays SKIP)."""

def set_recompile_limit(limit: int) -> None:
    """Entries per code object before it runs eagerly on misses; ValueError if < 1."""

def get_recompile_limit() -> int: ...
def installed_evaluator() -> Literal["default", "fastdynamo", "passthrough", "other"]:
    """Which evaluator is installed on this interpreter."""

def tensor_layout() -> dict[
    Literal[
        "impl_offset", "autograd_offset", "ndim_offset", "dtype_offset", "device_offset",
        "keyset_offset", "out_of_line",
    ],
    int,
] | None:
    """Where the tensor guard fast path reads torch's TensorImpl (byte offsets;
    ``out_of_line`` is 1 when tensors with more than 5 dims were verified), or None when
    the layout of this torch could not be verified and tensor guards use the slow path.
    Calibrates on first call."""

def _cpu_kernel_data_layout() -> dict[
    Literal[
        "storage_pointer_offset", "storage_offset_offset", "numel_offset", "storage_data_offset",
        "storage_check_offset",
    ],
    int,
] | None:
    """Where ``CpuKernel`` reads tensors' data addresses in place (byte offsets into the
    TensorImpl, and into the StorageImpl for ``storage_data_offset`` and the
    ``storage_check_offset`` flag byte), or None when that layout could not be verified
    on this torch and every address is asked of torch. Calibrates on first call."""

def _cpu_kernel_force_python(enabled: bool) -> bool:
    """Tests: ask torch for every ``CpuKernel`` tensor argument's address (True) or read
    them in place where the layout allows (False); returns the previous setting."""

def _set_passthrough_evaluator(enabled: bool) -> None:
    """Benches and tests: install (True) or remove (False) a pass-through evaluator."""

def _passthrough_frames() -> int:
    """Benches and tests: frames the pass-through evaluator has evaluated so far."""

def _code_extra_read_in_place() -> bool:
    """Tests: whether the hook reads ``co_extra`` in place (its layout verified at import
    on this CPython) rather than through ``_PyCode_GetExtra``."""
