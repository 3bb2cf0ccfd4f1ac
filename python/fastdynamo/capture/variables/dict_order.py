"""Key order is part of a dict's value (issue #10, class 5): a trace that iterated a dict
from the frame (an argument, ``module._modules``) is only valid for dicts whose keys come
in the same order.

The guard is ``("keys_are", keys)``: an exact dict (or a dict subclass read through the
mapping protocol) whose keys iterate as ``keys``. The sources and checks that exist
(``attr``, ``item``, ``equals``, ``len_is`` ...) cannot see an order: a dict has no
attribute or item that changes when its keys are reordered. Until the native guard set
knows this check (probed once, :func:`keys_order_guardable`), a trace that depends on the
order of a dict from the frame is unsupported (the graph breaks and Python iterates),
never a stale graph.

>>> keys_are(["a", 1])
('keys_are', ('a', 1))
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from ...exc import unsupported


def keys_are(keys: Iterable[Any]) -> tuple:
    """``tuple(value) == keys``, key by key with exact types (keys are str or int)."""
    return ("keys_are", tuple(keys))


@functools.cache
def keys_order_guardable() -> bool:
    """Whether the native GuardSet accepts the ``keys_are`` check."""
    from ..._runtime import native

    try:
        native().GuardSet([(("local", 0, "d"), keys_are(("a",)))])
    except (ValueError, TypeError):
        return False
    return True


def guard_key_order(tx, source, keys: Iterable[Any], what: str) -> None:
    """The trace relies on the order of ``keys``, the keys of the dict at ``source``."""
    if source is None:
        return
    if not keys_order_guardable():
        raise unsupported(f"{what} depends on the key order of {source.name()}, which guards "
                          "cannot check yet (the native keys_are check)")
    tx.output.add_guard(source, keys_are(keys))


class OrderGuard:
    """Attached to a DictVariable read from the frame: guards its key order (as it was
    when the frame started) the first time the trace depends on it."""

    def __init__(self, tx, source, keys: Iterable[Any]):
        self.tx = tx
        self.source = source
        self.keys = tuple(keys)
        self.done = False

    def __call__(self, what: str) -> None:
        if not self.done:
            guard_key_order(self.tx, self.source, self.keys, what)
            self.done = True


__all__ = ["OrderGuard", "guard_key_order", "keys_are", "keys_order_guardable"]


def guard_module_table(tx, module_source, module, table: str) -> None:
    """Iterating ``module._modules``/``_parameters`` (a ModuleList, Sequential,
    ParameterList or ModuleDict): its length, and its key order, are guarded.

    ModuleList/Sequential/ParameterList keep the keys ``"0".."n-1"`` in order through
    their whole API (append, insert, ``del`` renumber them), so without the native
    ``keys_are`` check their length is guarded and the order assumed; a ModuleDict's
    keys are the user's, so its order must be guarded or the trace is unsupported.
    """
    from ...guards import len_is
    from ...guards.sources import AttrSource

    if module_source is None:
        return
    source = AttrSource(module_source, table)
    entries = module.__dict__[table]
    tx.output.add_guard(source, len_is(len(entries)))
    numbered = list(entries) == [str(i) for i in range(len(entries))]
    if keys_order_guardable() or not numbered:
        guard_key_order(tx, source, entries.keys(), f"iterating {type(module).__qualname__}")


def guard_module_length(tx, module_source, module) -> None:
    """``len(module)`` of a ModuleList, Sequential, ModuleDict (their ``_modules``) or
    ParameterList (its ``_size``)."""
    from ...guards import equals, len_is
    from ...guards.sources import AttrSource

    if module_source is None:
        return
    if "_size" in module.__dict__:  # ParameterList counts its items in _size
        tx.output.add_guard(AttrSource(module_source, "_size"), equals(module.__dict__["_size"]))
    else:
        tx.output.add_guard(AttrSource(module_source, "_modules"), len_is(len(module.__dict__["_modules"])))
