"""Building many small objects at once without the cyclic garbage collector's repeated scans."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause cyclic garbage collection while a bulk load builds its objects.

    Loading a session allocates several containers per turn, and each allocation burst triggers
    collections that scan every object built so far: about two thirds of a large load's time.
    The objects hold no reference cycles, so reference counting frees them as usual. Nested and
    concurrent pauses (from several threads) restore the collector once, when the last one ends,
    and only if it was enabled before the first began.
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                _age_without_scanning()
                gc.enable()


def _age_without_scanning() -> None:
    """Move every tracked object to the oldest generation without a scan: freezing them and
    unfreezing at once does (CPython splices its lists). Otherwise the first allocation after
    the pause scans everything built during it, to promote it (a twentieth of a load), and the
    next collection of the middle generation scans it again. Only when nothing is frozen: an
    application that froze its objects (`gc.freeze()` before forking) keeps them frozen."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
