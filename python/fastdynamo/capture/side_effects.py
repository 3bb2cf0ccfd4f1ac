"""Side effects of a traced region: stores to attributes, globals and closure cells, and
mutations of lists and dicts that existed before the frame.

Nothing outside the graph is mutated while tracing. A store is recorded here and later
reads see the stored value (``self.n += 1`` twice reads the pending 1 the second time);
a list or dict read from the frame is modelled by one ListVariable/DictVariable whose
items the trace mutates. :meth:`SideEffects.plans` turns the pending state into codegen
effects (:mod:`fastdynamo.transform.codegen`) that the transformed code performs once, after the
graph ran (so after the in-place tensor ops inside it):

- **Stores** replay in program order, one per target (an attribute of one object, a
  global, a cell) with its last value, at the position of its first store. Targets are
  set with plain ``object.__setattr__`` (or ``nn.Module.__setattr__``), dict stores or
  cell stores, and no other code runs during the traced region, so an earlier value of
  a target is never observed; the first position keeps the insertion order of new
  names in ``obj.__dict__`` and in the globals.
- **Lists and dicts** are set to their final items (``obj[:] = items``, clear + update).
  Their identity is kept and only their own contents change, which nothing read in
  between, so this equals replaying each append/insert/del.

Values a source names are the values the frame started with: codegen loads them before
the first effect.

**Identity.** Pending state is keyed by the real object (``id``), so every path to one
object sees it. When the frame mutates an object reached through two sources, or
mutates one object while it also reads another of the same kind (type; for cells,
variable name) through another source, the trace relied on which of those sources are
one object. Those objects are pinned with ``id_is`` guards if every such source hangs
off long-lived state (a module guarded by identity, a global, the closure); otherwise
the relation itself is guarded (:meth:`SideEffects.relation_guards`, checked natively):
``same_object`` over the paths of one mutated object, ``distinct_objects`` over one
path of each object of a kind of which one is mutated (read-only objects of that kind
too, and their own paths as one object: a stricter guard than needed, which can only
cost a recompile). Cells are never related by guards (a cell is reached only through
its function): their aliasing is unsupported. Objects guarded by identity (modules)
never conflict; closure cells of different variables are never one cell (a cell is
reached under the name of its variable; closures built by hand with
``types.FunctionType(..., closure)`` are assumed not to rename cells).

>>> from fastdynamo.transform.codegen import StoreAttr
>>> from fastdynamo.guards.sources import LocalSource
>>> from fastdynamo.capture.output import OutputPlanBuilder
>>> from fastdynamo.capture.variables.constant import ConstantVariable
>>> from fastdynamo.capture.variables.misc import UserObjectVariable
>>> class Box: pass
>>> box = Box()
>>> effects = SideEffects()
>>> var = UserObjectVariable(box, LocalSource(0, "box"))
>>> effects.track(box, var.source, var)
>>> effects.store_attr(var, box, "n", ConstantVariable(1))
>>> effects.store_attr(var, box, "n", ConstantVariable(2))
>>> effects.load_attr(box, "n").value
2
>>> effects.plans(OutputPlanBuilder())
[StoreAttr(obj=FromSource(source=LocalSource(index=0, local_name='box')), name='n', value=Constant(value=2))]
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..exc import Unsupported, unsupported
from ..guards import Guard, distinct_objects, id_is, same_object
from ..guards.sources import (
    AttrSource,
    CallSource,
    ClosureSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    Source,
    TypeSource,
    WeakRefCallSource,
)
from ..plans import (
    BuildDict,
    BuildList,
    Constant,
    Effect,
    FromSource,
    ReplaceDict,
    ReplaceList,
    SetCellContents,
    StoreAttr,
    StoreDeref,
    StoreGlobal,
)
from .variables.base import VariableTracker
from .variables.containers import DictVariable, ListVariable

if TYPE_CHECKING:  # pragma: no cover
    from .output import OutputPlanBuilder

Where = tuple[str, int, str]  # (filename, line, function) of the construct, for errors


def where_of(tx) -> Where | None:
    """Where ``tx`` (a translator) is now, for errors raised when effects are planned."""
    return (tx.code.co_filename, tx.lineno, tx.name) if hasattr(tx, "code") else None


@dataclass
class _Tracked:
    """An object (or cell) from before the frame, and the sources that reached it."""

    obj: Any  # kept alive so its id stays unique during the trace
    kind: Any  # objects of one kind may be one object on a later call
    sources: list[Source]
    pinned_sources: set[Source]  # guarded by identity: cannot alias differently later
    variable: VariableTracker | None = None
    mutated: bool = False

    @property
    def pinned(self) -> bool:
        return all(source in self.pinned_sources for source in self.sources)


@dataclass
class _Store:
    """A pending store: the last value of one target."""

    kind: str  # "attr", "global" or "cell"
    target: Source | None  # the object or the cell; None for a global
    name: str
    value: VariableTracker
    where: Where | None = None


class SideEffects:
    """Pending mutations of one capture; owned by the OutputGraph (``output.side_effects``)
    and so shared by inlined translators. ``add_guard(source, check)`` lets it pin
    objects by identity (see :meth:`_settle`); without it such frames are unsupported."""

    def __init__(self, add_guard: Callable[[Source, tuple], None] | None = None) -> None:
        self._add_guard = add_guard
        self._tracked: dict[int, _Tracked] = {}
        self._by_source: dict[Source, _Tracked] = {}
        self._stores: dict[tuple, _Store] = {}
        self._containers: dict[int, tuple[VariableTracker, Source, Where | None]] = {}
        # relations the trace relied on, guarded by relation_guards(): objects reached by
        # several paths, and kinds whose objects must stay distinct
        self._related_entries: dict[int, _Tracked] = {}
        self._distinct_kinds: list[Any] = []
        self._fresh: set[int] = set()
        # entries added to a dict from outside, keyed by objects (an optimizer's lazily made
        # state, ``opt.state[param] = {...}``) or into it: (dict source, key source or None,
        # items, where)
        self._keyed_entries: list[tuple[Source, Source | None, dict[str, VariableTracker], Where | None]] = []

    def __bool__(self) -> bool:
        return bool(self._stores or self._containers or self._keyed_entries)

    # -- identity -------------------------------------------------------------------
    def tracked_variable(self, obj: Any, source: Source) -> VariableTracker | None:
        """The variable already modelling ``obj`` when it was reached through ``source``
        (a list read twice is one ListVariable, so mutations through either are seen)."""
        entry = self._tracked.get(id(obj))
        if entry is not None and source in entry.sources:
            return entry.variable
        return None

    def track(self, obj: Any, source: Source, variable: VariableTracker | None = None,
              pinned: bool = False, kind: Any = None) -> None:
        """Record that the trace reached ``obj`` (a list, dict, user object, module or
        cell from before the frame) through ``source``; ``pinned`` when ``source`` is
        guarded by identity."""
        entry = self._tracked.get(id(obj))
        if entry is None:
            entry = _Tracked(obj, kind if kind is not None else type(obj), [source],
                             {source} if pinned else set(), variable)
            self._tracked[id(obj)] = entry
            self._by_source[source] = entry
            for other in list(self._tracked.values()):
                if other.mutated:
                    self._check_distinct(other, entry)
            return
        if source not in entry.sources:
            entry.sources.append(source)
            if pinned:
                entry.pinned_sources.add(source)
            self._by_source[source] = entry
            if entry.mutated:
                self._check_alone(entry)
            for other in list(self._tracked.values()):
                if other.mutated and other is not entry:
                    self._check_distinct(other, entry)  # the new path too
        if entry.variable is None:
            entry.variable = variable

    def _mark_mutated(self, obj: Any, source: Source, pinned: bool, kind: Any = None) -> _Tracked:
        self.track(obj, source, pinned=pinned, kind=kind)
        entry = self._tracked[id(obj)]
        self._check_alone(entry)
        for other in list(self._tracked.values()):
            if other is not entry:
                self._check_distinct(entry, other)
        entry.mutated = True
        return entry

    def _check_alone(self, entry: _Tracked) -> None:
        if len(entry.sources) < 2:
            return
        first, second = (s.name() for s in entry.sources[:2])
        if isinstance(entry.variable, (ListVariable, DictVariable)):
            # each source has its own variable (and guards): a change through one would
            # not be seen through the other
            raise unsupported(f"{first} and {second} are the same {entry.kind.__name__}, which the "
                              "frame mutates; a container reached through two paths is not modelled "
                              "(side effect)")
        if not entry.pinned:
            self._settle([entry], f"{first} and {second} are the same object and the frame mutates it; "
                                  "guards cannot check that they stay one object (side effect)",
                         relate=lambda: self._related_entries.setdefault(id(entry.obj), entry))

    def mark_fresh(self, obj: Any) -> None:
        """``obj`` was made for this call (the compiled frame's ``**kwargs`` dict): no
        other source reaches it, so it is distinct from every other object."""
        self._fresh.add(id(obj))

    def _check_distinct(self, mutated: _Tracked, other: _Tracked) -> None:
        if other.kind != mutated.kind or (mutated.pinned and other.pinned):
            return
        if id(mutated.obj) in self._fresh or id(other.obj) in self._fresh:
            return
        kind = mutated.kind[0] if isinstance(mutated.kind, tuple) else mutated.kind.__qualname__
        self._settle([mutated, other], f"the frame mutates {mutated.sources[0].name()} and reads "
                                       f"{other.sources[0].name()}, another {kind} object; guards "
                                       "cannot check that they are different objects (side effect)",
                     relate=lambda: self._relate_kind(mutated.kind))

    def settle_identity(self, objects: list[tuple[Any, Source]], reason: str) -> None:
        """The trace decided ``a is b`` for objects read through these sources (one
        object, or several): each is pinned as :meth:`_settle` does, or Unsupported
        (identity between short-lived sources is not related by guards here)."""
        for obj, source in objects:
            self.track(obj, source)
        entries = {id(entry): entry for entry in (self._by_source[source] for _, source in objects)}

        def cannot_relate() -> None:
            raise unsupported(reason)
        self._settle(list(entries.values()), reason, relate=cannot_relate)

    def object_at(self, source: Source | None) -> Any:
        """The object from before the frame that the trace reached through ``source``,
        or None."""
        entry = self._by_source.get(source) if source is not None else None
        return entry.obj if entry is not None else None

    def _relate_kind(self, kind: Any) -> None:
        if kind not in self._distinct_kinds:
            self._distinct_kinds.append(kind)

    def _settle(self, entries: list[_Tracked], reason: str, relate: Callable[[], Any]) -> None:
        """Objects whose identity the trace relied on (one object through two sources, or
        two objects of a kind, one mutated): pinned with ``id_is`` guards when every
        source hangs off state that outlives a call (a module guarded by identity, a
        global, the closure), so later calls see the same objects; otherwise the relation
        is recorded (``relate``) and guarded by :meth:`relation_guards`. Cells cannot be
        related by guards: Unsupported."""
        unpinned = [entry for entry in entries if not entry.pinned]
        if self._add_guard is None or any(isinstance(entry.kind, tuple) for entry in unpinned):
            raise unsupported(reason)  # (a cell is only reached through its function)
        if not all(self._long_lived(s) for entry in unpinned for s in entry.sources
                   if s not in entry.pinned_sources):
            relate()
            return
        for entry in unpinned:
            for source in entry.sources:
                if source not in entry.pinned_sources:
                    self._add_guard(source, id_is(entry.obj))
                    entry.pinned_sources.add(source)

    def relation_guards(self) -> list[Guard]:
        """The relations the trace relied on, as guards (see the module docstring): each
        object reached through several paths is one object; the objects of each kind of
        which one is mutated are distinct, each through its first path (its other
        paths are tied to it by a ``same_object`` guard)."""
        guards: list[Guard] = []
        tied: set[int] = set()

        def tie(entry: _Tracked) -> None:
            if len(entry.sources) > 1 and id(entry.obj) not in tied:
                tied.add(id(entry.obj))
                guards.append(Guard(None, same_object(*entry.sources)))

        for entry in self._related_entries.values():
            tie(entry)
        for kind in self._distinct_kinds:
            entries = [entry for entry in self._tracked.values() if entry.kind == kind]
            if len(entries) > 1:
                guards.append(Guard(None, distinct_objects(*(entry.sources[0] for entry in entries))))
                for entry in entries:
                    tie(entry)
        return guards

    def _long_lived(self, source: Source) -> bool:
        for base in _bases(source):
            entry = self._by_source.get(base)
            if entry is not None and base in entry.pinned_sources:
                return True
            if isinstance(base, (GlobalSource, ClosureSource)):
                return True
        return False

    # -- attributes -----------------------------------------------------------------
    def store_attr(self, obj_var: VariableTracker, obj: Any, name: str, value: VariableTracker,
                   pinned: bool = False, where: Where | None = None) -> None:
        """``obj.name = value`` where ``obj`` (modelled by ``obj_var``) has a source and
        plain attribute assignment (checked by the caller)."""
        source = obj_var.source
        assert source is not None, "store_attr needs an object with a source"
        entry = self._mark_mutated(obj, source, pinned)
        self._record(("attr", id(obj), name), _Store("attr", entry.sources[0], name, value, where))

    def load_attr(self, obj: Any, name: str) -> VariableTracker | None:
        """The pending value of ``obj.name``, or None when the frame has not stored it."""
        store = self._stores.get(("attr", id(obj), name))
        return store.value if store is not None else None

    def pending_attrs(self, obj: Any) -> list[tuple[str, VariableTracker]]:
        """The frame's pending attribute stores on ``obj``, in the order first made."""
        return [(store.name, store.value) for key, store in self._stores.items()
                if key[0] == "attr" and key[1] == id(obj)]

    # -- globals (of the compiled frame) ----------------------------------------------
    def store_global(self, name: str, value: VariableTracker, where: Where | None = None) -> None:
        self._record(("global", name), _Store("global", None, name, value, where))

    def load_global(self, name: str) -> VariableTracker | None:
        store = self._stores.get(("global", name))
        return store.value if store is not None else None

    # -- closure cells --------------------------------------------------------------
    def store_cell(self, cell: Any, cell_source: Source, name: str, value: VariableTracker,
                   where: Where | None = None) -> None:
        """A store to a real closure cell: the compiled frame's own (``ClosureSource``)
        or one of an inlined function (``fn.__closure__[i]``)."""
        pinned = not isinstance(cell_source, ClosureSource)
        entry = self._mark_mutated(cell, cell_source, pinned, kind=("cell", name))
        self._record(("cell", id(cell)), _Store("cell", entry.sources[0], name, value, where))

    def load_cell(self, cell: Any) -> VariableTracker | None:
        store = self._stores.get(("cell", id(cell)))
        return store.value if store is not None else None

    # -- containers -----------------------------------------------------------------
    def mutate_container(self, var: VariableTracker, where: Where | None = None) -> None:
        """``var`` (a list or dict with a source) is about to be mutated in place."""
        source = var.source
        entry = self._by_source.get(source) if source is not None else None
        if source is None or entry is None:
            what = source.name() if source is not None else var.describe()
            raise unsupported(f"mutating {what}, which the trace did not track (side effect)")
        self._mark_mutated(entry.obj, source, entry.pinned)
        self._containers.setdefault(id(var), (var, source, where))

    def add_keyed_entry(self, dict_source: Source, key_source: Source | None, items: dict[str, VariableTracker],
                        where: Where | None = None) -> None:
        """``d[key] = {items}`` after the graph, for a dict ``d`` the trace only reads
        through keys it does not otherwise model (an optimizer's ``state``, keyed by
        parameters). Replayed as ``dict.update(d, {key: {items}})``: other keys stay.
        Without ``key_source``, ``dict.update(d, {items})``: ``d`` itself gets the items."""
        self._keyed_entries.append((dict_source, key_source, items, where))

    def _record(self, key: tuple, store: _Store) -> None:
        previous = self._stores.get(key)
        if previous is not None:
            previous.value, previous.where = store.value, store.where
        else:
            self._stores[key] = store

    # -- codegen --------------------------------------------------------------------
    def plans(self, builder: OutputPlanBuilder) -> list[Effect]:
        """The pending effects as codegen effect nodes, in the order they run; tensors
        they need become graph outputs through ``builder``. Does not clear anything: it
        can be called at the end of a trace or at any point in the middle."""
        effects: list[Effect] = []
        for store in self._stores.values():
            value = _plan(builder, store.value, store.where, f"assignment to {_target_name(store)}")
            if store.kind == "attr":
                effects.append(StoreAttr(FromSource(store.target), store.name, value))
            elif store.kind == "global":
                effects.append(StoreGlobal(store.name, value))
            elif isinstance(store.target, ClosureSource):
                effects.append(StoreDeref(store.target.free_name, value))
            else:
                effects.append(SetCellContents(FromSource(store.target), value))
        for var, source, where in self._containers.values():
            what = f"the new contents of {source.name()}"
            if isinstance(var, ListVariable):
                items = BuildList([_plan(builder, item, where, what) for item in var.items])
                effects.append(ReplaceList(FromSource(source), items))
            elif isinstance(var, DictVariable):
                entries = BuildDict([(Constant(k), _plan(builder, v, where, what)) for k, v in var.items.items()])
                # pops and an update (not clear + update): the caller's order stays
                effects.append(ReplaceDict(FromSource(source), entries, deleted=tuple(var.deleted_keys)))
        for dict_source, key_source, new_items, where in self._keyed_entries:
            what = f"the new entry of {dict_source.name()}"
            made = BuildDict([(Constant(k), _plan(builder, v, where, what)) for k, v in new_items.items()])
            entry = made if key_source is None else BuildDict([(FromSource(key_source), made)])
            effects.append(ReplaceDict(FromSource(dict_source), entry, deleted=()))
        return effects


def _bases(source: Source | None) -> Iterator[Source]:
    """``source`` and the sources it is read from, innermost first (``a.b[0]``, ``a.b``, ``a``)."""
    while source is not None:
        yield source
        source = source.base if isinstance(source, (AttrSource, GenericAttrSource, ItemSource, TypeSource,
                                                    WeakRefCallSource, CallSource)) \
            else None


def _target_name(store: _Store) -> str:
    if store.kind == "attr" and store.target is not None:
        return f"{store.target.name()}.{store.name}"
    if store.kind == "global":
        return f"global {store.name}"
    return f"nonlocal {store.name}"


def _plan(builder: OutputPlanBuilder, value: VariableTracker, where: Where | None, what: str):
    try:
        return builder.plan(value)
    except Unsupported as err:
        err.reason = f"{what}: {err.reason}"
        err.args = (err.reason,)
        if where is not None and not err.where:
            err.where.append(where)
        raise
