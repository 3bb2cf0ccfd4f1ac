"""Sources: where a value seen by the translator came from.

A source is plain, hashable data. The translator attaches one to every value it reads
from the frame; guards are checks on sources (compiled to Rust through
:func:`Source.spec`), and codegen turns a source back into bytecode that loads the
value (``LOAD_FAST x``, ``LOAD_GLOBAL torch`` then ``LOAD_ATTR nn`` ...).

>>> src = AttrSource(LocalSource(0, "self"), "weight")
>>> src.name()
'self.weight'
>>> src.spec()
('attr', ('local', 0, 'self'), 'weight')
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable, Hashable, TypeVar


class Source:
    """Base class; subclasses are frozen dataclasses."""

    def name(self) -> str:
        """Readable Python expression for the value, used in guard text and logs."""
        raise NotImplementedError

    def spec(self) -> tuple:
        """The plain-tuple form the native guard compiler reads (see guards/__init__.py)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


_Class = TypeVar("_Class", bound=type)


def _hashed_once(cls: _Class) -> _Class:
    """A frozen dataclass whose hash is computed once: the generated ``__hash__`` hashes
    every field on each call, so a chain ``self.layers[0].attn.q.weight`` was hashed whole
    each time it keyed a dict (guards, side effects, inputs: thousands a trace)."""
    fields_hash: Callable[[Any], int] = cls.__dict__["__hash__"]

    def __hash__(self: Any) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = fields_hash(self)
            object.__setattr__(self, "_hash", value)
            return value

    cls.__hash__ = __hash__  # type: ignore[assignment]
    return cls


@_hashed_once
@dataclass(frozen=True)
class LocalSource(Source):
    """A frame local, by its index in ``co_varnames + co_cellvars + co_freevars`` order
    (CPython's ``localsplus``). At frame entry only arguments are set."""

    index: int
    local_name: str

    def name(self) -> str:
        return self.local_name

    def spec(self) -> tuple:
        return ("local", self.index, self.local_name)


@_hashed_once
@dataclass(frozen=True)
class GlobalSource(Source):
    """A name in the frame's globals dict."""

    global_name: str

    def name(self) -> str:
        return self.global_name

    def spec(self) -> tuple:
        return ("global", self.global_name)


@_hashed_once
@dataclass(frozen=True)
class BuiltinSource(Source):
    """A name in the frame's builtins dict, read as ``LOAD_GLOBAL`` reads it: a global
    of the same name (defined after the trace) shadows it."""

    builtin_name: str

    def name(self) -> str:
        return f"__builtins__.{self.builtin_name}"

    def spec(self) -> tuple:
        return ("builtin", self.builtin_name)


@_hashed_once
@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of a cell of the function's ``__closure__``, by index in
    ``co_freevars``."""

    index: int
    free_name: str

    def name(self) -> str:
        return self.free_name

    def spec(self) -> tuple:
        return ("closure", self.index, self.free_name)


@_hashed_once
@dataclass(frozen=True)
class AttrSource(Source):
    """``base.attr``."""

    base: Source
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def spec(self) -> tuple:
        return ("attr", self.base.spec(), self.attr)


@_hashed_once
@dataclass(frozen=True)
class GenericAttrSource(Source):
    """``object.__getattribute__(base, attr)``: the generic lookup (data descriptor,
    instance dict, class), for objects whose class customises ``__getattribute__``; a
    guard or a load through it never runs the class's own lookup."""

    base: Source
    attr: str

    def name(self) -> str:
        return f"object.__getattribute__({self.base.name()}, {self.attr!r})"

    def spec(self) -> tuple:
        return ("generic_attr", self.base.spec(), self.attr)


@_hashed_once
@dataclass(frozen=True)
class ItemSource(Source):
    """``base[key]`` for a constant, hashable key (int, str, ...)."""

    base: Source
    key: Hashable

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"

    def spec(self) -> tuple:
        return ("item", self.base.spec(), self.key)


@_hashed_once
@dataclass(frozen=True)
class TypeSource(Source):
    """``type(base)``."""

    base: Source

    def name(self) -> str:
        return f"type({self.base.name()})"

    def spec(self) -> tuple:
        return ("type", self.base.spec())


@_hashed_once
@dataclass(frozen=True)
class WeakRefCallSource(Source):
    """``base()`` where ``base`` is exactly a ``weakref.ref``: its referent, or None once
    the referent died. The native accessor calls only exact weak references (a subclass
    may override ``__call__``); anything else makes the guard fail."""

    base: Source

    def name(self) -> str:
        return f"{self.base.name()}()"

    def spec(self) -> tuple:
        return ("weakref_call", self.base.spec())


@_hashed_once
@dataclass(frozen=True)
class DictItemsSource(Source):
    """The own items of ``base``, a ``dict`` subclass instance, as a new plain dict in
    its iteration order (:func:`dict_items_of`): what a guard reads of a dict subclass
    whose class overrides ``__getitem__``/``__contains__``/``__len__``."""

    base: Source

    def name(self) -> str:
        return f"dict_items_of({self.base.name()})"

    def spec(self) -> tuple:
        return ("call", self.base.spec(), dict_items_of)


@_hashed_once
@dataclass(frozen=True)
class CallSource(Source):
    """``function(base)`` for a function that runs no user code (an optimizer's
    per-parameter state, a float wrapped as a tensor:
    :mod:`fastdynamo.capture.variables.optimizers`). The same function object for the
    same read, so guards share it (the native accessor is keyed by address)."""

    base: Source
    function: Callable[[Any], Any]
    label: str = ""  # the name, for a function without ``__name__`` (``operator.methodcaller``)

    def name(self) -> str:
        return f"{self.label or getattr(self.function, '__name__', '?')}({self.base.name()})"

    def spec(self) -> tuple:
        return ("call", self.base.spec(), self.function)


def dict_items_of(obj: Any) -> dict:
    """``obj``'s own items (``obj`` a dict subclass instance) through the built-in
    methods only, in the built-in base's iteration order (an OrderedDict's own order).

    >>> import collections
    >>> class D(collections.OrderedDict):
    ...     def __getitem__(self, key): return "overridden"
    >>> dict_items_of(D(a=1))
    {'a': 1}
    """
    import collections

    keys = collections.OrderedDict.keys(obj) if isinstance(obj, collections.OrderedDict) else dict.keys(obj)
    return {key: dict.__getitem__(obj, key) for key in keys}


def resolve(source: Source, f_locals: list[Any], f_globals: dict, f_builtins: dict,
            closure: tuple | None) -> Any:
    """Evaluate ``source`` in Python (tests and debugging; the hot path does it in Rust)."""
    if isinstance(source, LocalSource):
        return f_locals[source.index]
    if isinstance(source, GlobalSource):
        return f_globals[source.global_name]
    if isinstance(source, BuiltinSource):  # as LOAD_GLOBAL: a global shadows the builtin
        name = source.builtin_name
        return f_globals[name] if name in f_globals else f_builtins[name]
    if isinstance(source, ClosureSource):
        assert closure is not None
        return closure[source.index].cell_contents
    if isinstance(source, AttrSource):
        return getattr(resolve(source.base, f_locals, f_globals, f_builtins, closure), source.attr)
    if isinstance(source, GenericAttrSource):
        return object.__getattribute__(resolve(source.base, f_locals, f_globals, f_builtins, closure),
                                       source.attr)
    if isinstance(source, ItemSource):
        return resolve(source.base, f_locals, f_globals, f_builtins, closure)[source.key]
    if isinstance(source, TypeSource):
        return type(resolve(source.base, f_locals, f_globals, f_builtins, closure))
    if isinstance(source, WeakRefCallSource):
        reference = resolve(source.base, f_locals, f_globals, f_builtins, closure)
        if type(reference) is not weakref.ReferenceType:
            raise TypeError(f"{source.base.name()} is not a weakref.ref")
        return reference()
    if isinstance(source, DictItemsSource):
        return dict_items_of(resolve(source.base, f_locals, f_globals, f_builtins, closure))
    if isinstance(source, CallSource):
        return source.function(resolve(source.base, f_locals, f_globals, f_builtins, closure))
    raise TypeError(f"not a source: {source!r}")
