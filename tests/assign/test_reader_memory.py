"""The memory that a write gives the live expressions reading its destination is handed out again,
call after call, once nothing holds it (so a training loop's step keeps its addresses), and never
while something does (values stay values)."""
import gc

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import lazytensor as lt
from lazytensor.core.memory import address


def _step(w, b):
    """A simultaneous write of w and b while an expression of w is live: -> that expression."""
    reader = w * 2.0
    lt.assign([(w, w - 0.5), (b, b + 1.0)])
    return reader


def test_a_dropped_readers_memory_comes_back_to_the_next_call():
    w, b = lt.asarray(np.arange(6, dtype=np.float32), device="cpu"), lt.zeros(6, np.float32, "cpu")
    first = _step(w, b)
    at = address(first.result.data)
    del first
    gc.collect()
    taken = [np.empty(n, np.uint8) for n in range(1, 256)]     # memory freed now goes to these
    second = _step(w, b)
    del taken
    assert address(second.result.data) == at
    np.testing.assert_array_equal(second.numpy(), (np.arange(6) - 0.5) * 2)


@settings(max_examples=25, deadline=None)
@given(holds=st.lists(st.sampled_from(["drop", "hold", "view"]), min_size=1, max_size=6),
       size=st.integers(0, 9))
def test_a_held_readers_value_is_never_overwritten(holds, size):
    """Over a sequence of steps, each reader dropped, held, or seen through a NumPy view of its
    memory: every one still held keeps the value it had when its step ran."""
    w, b = lt.asarray(np.linspace(-1, 1, size).astype(np.float32), device="cpu"), lt.zeros(size, np.float32, "cpu")
    kept = []
    for hold in holds:
        expected = w.numpy() * 2
        reader = _step(w, b)
        if hold == "hold":
            kept.append((reader, expected))
        elif hold == "view":
            kept.append((np.asarray(reader.result.data), expected))
        del reader
        gc.collect()
    for value, expected in kept:
        np.testing.assert_array_equal(np.asarray(value), expected)


def test_release_graphs_drops_the_kept_memory():
    from lazytensor.assign import reader_memory
    w, b = lt.asarray(np.ones(4, np.float32), device="cpu"), lt.zeros(4, np.float32, "cpu")
    _step(w, b)
    assert reader_memory._kept
    lt.release_graphs()
    assert not reader_memory._kept


def test_a_reader_held_only_as_a_value_moves_and_the_next_call_keeps_its_addresses():
    """A loop that keeps each step's reader (a loss in a list) still gets the same memory every call:
    the held expression's value moves to a copy of its own, and keeps its value."""
    w, b = lt.asarray(np.arange(6, dtype=np.float32), device="cpu"), lt.zeros(6, np.float32, "cpu")
    kept, addresses = [], []
    for k in range(4):
        expected = w.numpy() * 2
        reader = _step(w, b)
        addresses.append(address(reader.result.data))
        kept.append((reader, expected))
        del reader
        gc.collect()
    assert len(set(addresses[1:])) == 1, addresses
    for value, expected in kept:
        np.testing.assert_array_equal(value.numpy(), expected)


def test_a_reader_whose_value_is_read_elsewhere_does_not_move():
    w, b = lt.asarray(np.arange(6, dtype=np.float32), device="cpu"), lt.zeros(6, np.float32, "cpu")
    first = _step(w, b)
    held = first.result                  # the Tensor itself held: its memory must not be reused
    at = address(held.data)
    second = _step(w, b)
    assert address(second.result.data) != at and first.result is held
    np.testing.assert_array_equal(held.numpy(), np.arange(6, dtype=np.float32) * 2)
