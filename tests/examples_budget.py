"""How many examples a generated test runs: a share of the loaded hypothesis profile's
``max_examples`` (``ci``, ``versions``, ``long``; see conftest.py), for tests whose one
example costs several programs' time (a sequence of compiled calls, several sizes), so
that each profile keeps its proportions and the ``ci`` run stays short."""
from __future__ import annotations

from hypothesis import Phase, settings


def share_of_profile(fraction: float) -> settings:
    """``@share_of_profile(0.1)``: a tenth of the profile's examples (at least 4); read
    when the test module is imported, after pytest loaded ``--hypothesis-profile``.
    Without the explain phase: it replays a failing example under a tracer, where the
    compiler runs every frame as Python, and would add a misleading "no graph" failure."""
    current = settings()
    return settings(max_examples=max(4, round(current.max_examples * fraction)),
                    phases=[phase for phase in current.phases if phase is not Phase.explain])
