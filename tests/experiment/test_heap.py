"""`settle`: the garbage of the jobs before is collected, and what is alive is frozen, so later
collections walk only what is made after it."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from sweep.experiment.heap import settle


class Node:
    """A cycle of one: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def frozen_undone() -> Iterator[None]:
    yield
    gc.unfreeze()


def is_tracked(obj: object) -> bool:
    """Whether `obj` is in one of the collector's generations (a frozen one is not)."""
    return any(other is obj for other in gc.get_objects())


def test_garbage_is_collected_and_the_living_frozen(frozen_undone: None) -> None:
    garbage, kept = Node(), Node()
    garbage_gone = weakref.ref(garbage)
    del garbage
    assert garbage_gone() is not None  # a cycle: its reference count alone does not free it
    settle()
    assert garbage_gone() is None
    assert not is_tracked(kept) and gc.get_freeze_count() > 0
    young = Node()
    assert is_tracked(young)  # made after: walked by the collections to come
    young_gone = weakref.ref(young)
    del young
    gc.collect()
    assert young_gone() is None


def test_a_frozen_cycle_waits_for_unfreeze(frozen_undone: None) -> None:
    """The price the module's docstring names: a cycle alive at `settle` that becomes garbage
    later stays until the process ends (or `gc.unfreeze`, as a worker does before it exits)."""
    late = Node()
    settle()
    late_gone = weakref.ref(late)
    del late
    gc.collect()
    assert late_gone() is not None
    gc.unfreeze()
    gc.collect()
    assert late_gone() is None
