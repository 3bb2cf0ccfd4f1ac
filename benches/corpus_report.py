"""How much of the datamodel corpus (tests/corpus/programs.py) compiles: frames that
``fullgraph=True`` refuses, graphs and graph breaks that ``explain()`` reports, the most
frequent break reasons, and any program whose compiled result differs from eager.

    python benches/corpus_report.py [--reasons N]
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests.corpus.compare import compare, refused_by_fullgraph  # noqa: E402
from tests.corpus.programs import PROGRAMS  # noqa: E402

import fastdynamo  # noqa: E402


def _reason_kind(reason: str) -> str:
    """A break reason without the details that differ between programs."""
    return re.sub(r"0x[0-9a-f]+|\d+", "N", reason)[:110]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reasons", type=int, default=25)
    options = parser.parse_args()
    fastdynamo.config.fallback_on_internal_error = False
    refused, graphs, breaks, python_only, mismatches = 0, 0, 0, 0, []
    reasons: collections.Counter = collections.Counter()
    for program in PROGRAMS:
        if refused_by_fullgraph(program) is not None:
            refused += 1
        fastdynamo.reset()
        try:
            report = fastdynamo.explain(program.fn, backend="eager")(*program.make_args())
        except Exception as err:  # noqa: BLE001 - a compiled run that raises is a finding
            mismatches.append((program.name, f"explain raised {type(err).__name__}: {err}"))
            continue
        graphs += report.graph_count
        breaks += report.graph_break_count
        python_only += report.graph_count == 0
        reasons.update(_reason_kind(b.reason) for b in report.break_reasons)
        fastdynamo.reset()
        difference = compare(program, fastdynamo.compile(program.fn, backend="eager"))
        if difference is not None:
            mismatches.append((program.name, difference))
        fastdynamo.reset()
    print(f"programs: {len(PROGRAMS)}")
    print(f"refused by fullgraph=True: {refused}")
    print(f"graphs: {graphs}; graph breaks: {breaks}; frames with no graph: {python_only}")
    print(f"results different from eager: {len(mismatches)}")
    for name, difference in mismatches:
        print(f"  {name}: {difference}")
    print("most frequent break reasons:")
    for reason, count in reasons.most_common(options.reasons):
        print(f"  {count:4d}  {reason}")


if __name__ == "__main__":
    main()
