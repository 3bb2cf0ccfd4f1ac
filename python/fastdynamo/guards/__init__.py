"""Guards: checks on sources that must hold for a cache entry to be reused.

The translator records :class:`Guard` objects; :func:`compile_guards` turns them into
the native ``GuardSet`` (a Rust tree evaluated on every call). The spec is plain tuples
so that the Rust side never calls back into Python to understand it.

>>> from fastdynamo.guards.sources import LocalSource
>>> g = Guard(LocalSource(0, "n"), equals(4))
>>> g.spec()
(('local', 0, 'n'), ('equals', 4))
>>> g.text()
'n == 4'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .sources import Source

TORCH_STATE = ("torch_state",)
RELATION = ("objects",)  # the pseudo-source of checks that relate several sources
_RELATIONS = {"distinct_objects": "distinct", "same_object": "same"}


@dataclass(frozen=True, eq=False)
class Guard:
    """One check on one source; ``source`` is None for global torch state and for
    relations between sources (the check names them)."""

    source: Source | None
    check: tuple

    def spec(self) -> tuple:
        if self.check[0] in _RELATIONS:
            return (RELATION, (_RELATIONS[self.check[0]], tuple(s.spec() for s in self.check[1])))
        return (self.source.spec() if self.source is not None else TORCH_STATE, self.check)

    def text(self) -> str:
        """Readable form, as printed by explain and FASTDYNAMO_LOGS=guards."""
        name = self.source.name() if self.source is not None else "torch"
        kind, *args = self.check
        if kind in _RELATIONS:
            verb = " is not " if kind == "distinct_objects" else " is "
            return verb.join(s.name() for s in args[0]) if len(args[0]) == 2 else \
                f"{kind}({', '.join(s.name() for s in args[0])})"
        if kind == "type_is":
            return f"type({name}) is {_qualname(args[0])}"
        if kind == "id_is":
            return f"{name} is <{type(args[0]).__name__} at {id(args[0]):#x}>"
        if kind == "equals":
            return f"{name} == {args[0]!r}"
        if kind == "type_defines":
            return f"{'some' if args[1] else 'no'} class of {name}.__mro__ defines {args[0]}"
        if kind == "code_is":
            return f"{name}.__code__ is <code {args[0].co_qualname}>"
        if kind == "len_is":
            return f"len({name}) == {args[0]}"
        if kind == "is_none":
            return f"{name} is None"
        if kind == "not_none":
            return f"{name} is not None"
        if kind == "contains":
            return f"{args[0]!r} {'in' if args[1] else 'not in'} {name}"
        if kind == "tensor":
            tensor, sizes, strides = args
            return (f"tensor {name}: {_qualname(type(tensor))} {tensor.dtype} {tensor.device} "
                    f"requires_grad={tensor.requires_grad} size={_dims(sizes)} stride={_dims(strides)}")
        if kind == "shape_exprs":
            return "shape guards:\n" + "\n".join(f"  {text}" for text in args[2])
        if kind == "query_is":
            return f"{getattr(args[0], '__qualname__', args[0])}{args[1]!r} == {args[2]!r}"
        if kind == "tables_empty":
            return "torch's global module hooks are empty"
        if kind in _STATE_READERS:
            return f"{_STATE_READERS[kind]} == {args[0]}"
        return f"{name}: {self.check!r}"


# How each torch-state check reads the state (the native GuardSet calls the same).
_STATE_READERS = {
    "grad_mode": "torch.is_grad_enabled()",
    "default_dtype": "torch.get_default_dtype()",
    "autocast": "torch._C._is_any_autocast_enabled()",
    "inference_mode": "torch.is_inference_mode_enabled()",
}


def type_is(cls: type) -> tuple:
    """``type(value) is cls``."""
    return ("type_is", cls)


def id_is(obj: Any) -> tuple:
    """``value is obj`` (the guard keeps ``obj`` alive)."""
    return ("id_is", obj)


def code_is(code: Any) -> tuple:
    """``value`` is a Python function whose ``__code__`` is ``code`` (read in place:
    assigning a function's ``__code__`` after the trace must not reuse the entry)."""
    return ("code_is", code)


def type_lacks(name: str) -> tuple:
    """``value`` is a type and no class of its MRO defines ``name`` (a lookup that found
    nothing must not be reused once a class gains the name, or a ``__getattr__``)."""
    return ("type_defines", name, False)


def type_defines(name: str) -> tuple:
    """``value`` is a type and some class of its MRO defines ``name``."""
    return ("type_defines", name, True)


def tables_empty(*tables: Any) -> tuple:
    """Global tables (torch's module-hook dicts) stay empty; a torch-state check."""
    return ("tables_empty", tables)


def query_is(query: Any, args: tuple, answer: Any) -> tuple:
    """``query(*args) == answer`` for a torch state query (``get_fastpath_enabled``),
    called by the guard; a torch-state check."""
    return ("query_is", query, args, answer)


def equals(value: Any) -> tuple:
    """``type(value) is type(const) and value == const``; const is an int, float, bool,
    str, bytes, None, or a tuple/frozenset of those."""
    return ("equals", value)


def len_is(length: int) -> tuple:
    """``len(value) == length`` (the type must be guarded separately)."""
    return ("len_is", length)


def is_none() -> tuple:
    return ("is_none",)


def not_none() -> tuple:
    return ("not_none",)


def contains(key: Any, present: bool) -> tuple:
    """``key in value`` is ``present``: a mapping key that must stay (or stay absent)."""
    return ("contains", key, present)


def tensor_match(tensor: Any, sizes: Sequence[int | None] | None = None,
                 strides: Sequence[int | None] | None = None) -> tuple:
    """Exact type, dtype, device, requires_grad, ndim, and the sizes/strides given
    (default: all of the example's; ``None`` in a position leaves that dim unchecked)."""
    sizes = tuple(tensor.shape) if sizes is None else tuple(sizes)
    strides = tuple(tensor.stride()) if strides is None else tuple(strides)
    if len(sizes) != tensor.dim() or len(strides) != tensor.dim():
        raise ValueError(f"tensor guard for a {tensor.dim()}-d tensor got sizes {sizes}, strides {strides}")
    return ("tensor", tensor, sizes, strides)


def distinct_objects(*sources: Source) -> tuple:
    """No two of ``sources`` are the same object (a relation: the guard's own source is
    None). What a trace relies on when it mutates one object and reads another that a
    later call could pass as the same one."""
    if len(sources) < 2:
        raise ValueError("distinct_objects needs at least two sources")
    return ("distinct_objects", tuple(sources))


def same_object(*sources: Source) -> tuple:
    """All of ``sources`` are one object (a relation, as :func:`distinct_objects`): a
    trace that reached one object through several paths and mutated it."""
    if len(sources) < 2:
        raise ValueError("same_object needs at least two sources")
    return ("same_object", tuple(sources))


def grad_mode(enabled: bool) -> tuple:
    return ("grad_mode", bool(enabled))


def default_dtype(dtype: Any) -> tuple:
    return ("default_dtype", dtype)


def autocast(enabled: bool) -> tuple:
    return ("autocast", bool(enabled))


def inference_mode(enabled: bool) -> tuple:
    return ("inference_mode", bool(enabled))


def compile_guards(guards: Iterable[Guard]) -> Any:
    """Compile guards into a native ``GuardSet`` (loads the native runtime)."""
    from .._runtime import native

    return native().GuardSet([g.spec() for g in guards])


def _qualname(cls: type) -> str:
    module = getattr(cls, "__module__", "builtins")
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def _dims(dims: Sequence[int | None]) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"
