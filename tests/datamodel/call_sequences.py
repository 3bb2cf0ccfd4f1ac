"""Call sequences for the generated tests of identity, weak references and aliasing:
one compiled function called with the objects of a *world* (made once per run, so the
same configuration passes the same objects again), compared with eager after every
call, and the graphs each call captured.

Eager and compiled each get their own world, built alike, so mutations never cross;
``world.reset()`` restores every object's state in place (identities kept) before each
call, so a configuration seen before is the same call again and must hit the cache.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable, Protocol, Sequence

import fastdynamo
from fastdynamo.convert_frame import Recorder

from .object_helpers import same


class World(Protocol):
    def reset(self) -> None: ...

    def state(self) -> Any: ...


@dataclass
class CompiledCalls:
    """What the compiled calls captured: graphs added by each call, and every break."""

    added: list[int]
    recorder: Recorder


def outcome(fn: Callable, args: Sequence[Any]) -> tuple[Any, tuple[type, str] | None]:
    try:
        return fn(*args), None
    except Exception as err:  # noqa: BLE001 - compared with the other run's
        return None, (type(err), str(err))


def run_sequence(prog: Callable, configurations: Sequence[Hashable], make_world: Callable[[], World],
                 arguments: Callable[[World, Hashable, int], Sequence[Any]], *, fullgraph: bool,
                 source: str, **options: Any) -> CompiledCalls:
    """``prog`` eagerly and compiled (``backend="eager"``) for each configuration in turn:
    the same value and type, exception, and state of the world after every call."""
    eager_world, compiled_world = make_world(), make_world()
    recorder = Recorder()
    compiled = fastdynamo.compile(prog, backend="eager", fullgraph=fullgraph, _recorder=recorder, **options)
    added = []
    for call, configuration in enumerate(configurations):
        where = f"call {call} ({configuration!r}) of {list(configurations)!r}\n{source}"
        eager_world.reset()
        compiled_world.reset()
        expected, expected_error = outcome(prog, arguments(eager_world, configuration, call))
        before = len(recorder.captures)
        actual, actual_error = outcome(compiled, arguments(compiled_world, configuration, call))
        added.append(len(recorder.captures) - before)
        reasons = [b.reason for b in recorder.breaks]
        assert actual_error == expected_error, f"{actual_error} != {expected_error} {reasons}\n{where}"
        assert same(actual, expected), f"{actual!r} != {expected!r}\n{where}"
        assert same(compiled_world.state(), eager_world.state()), f"the objects differ after\n{where}"
    return CompiledCalls(added, recorder)


def with_repeats(drawn: list) -> list:
    """The drawn configurations, the last one again at once, then the first one again."""
    return drawn + drawn[-1:] + drawn[:1]


def assert_graph_counts(run: CompiledCalls, configurations: Sequence[Hashable], *, fullgraph: bool,
                        source: str) -> None:
    """The first call compiled (a frame that ran as Python fails here); a configuration
    repeated at once adds no graph (the entries it just used hit). With ``fullgraph``: a
    call adds at most one graph, nothing broke, and any configuration seen before adds
    no graph (its entry is still there). (With breaks, a configuration seen before may
    match a newer entry for the part before the break, whose resume function then meets
    a state it was not compiled for: a new graph, and a correct one.)"""
    reasons = [b.reason for b in run.recorder.breaks]
    where = f"graphs added per call {run.added} for {list(configurations)!r} {reasons}\n{source}"
    assert run.added[0] >= 1, where
    for call, configuration in enumerate(configurations):
        if call and configuration == configurations[call - 1]:
            assert run.added[call] == 0, where
        if fullgraph and configuration in configurations[:call]:
            assert run.added[call] == 0, where
    if fullgraph:
        assert all(n <= 1 for n in run.added) and not reasons, where
