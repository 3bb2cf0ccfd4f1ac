"""Helpers for tests of the native runtime."""
from __future__ import annotations


def entry_for(native, transformed, guards):
    """A cache entry running ``transformed``'s code when the guard specs pass."""
    return native.CacheEntry(native.GuardSet(guards), transformed.__code__)


class Recorder:
    """A compile callback that records frames and returns what ``decide`` says."""

    def __init__(self, decide):
        self.decide = decide
        self.frames = []

    def __call__(self, frame):
        self.frames.append(frame)
        return self.decide(frame)

    @property
    def names(self):
        return [f.f_code.co_name for f in self.frames]


def only(function, decide):
    """A callback applying ``decide`` to frames of ``function`` and running every other
    frame (pytest's, the test's helpers') normally."""

    def callback(frame):
        return decide(frame) if frame.f_code is function.__code__ else None

    return callback
