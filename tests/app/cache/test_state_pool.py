"""StatePool / StateBlob: buffers are reused once every holder has released them."""

from __future__ import annotations

import pytest

from app.cache.host_cache import HostCache
from app.cache.state_pool import GRANULE, WARM_PIECE, StatePool
from mm.token_sequence import TokenSequence


def test_a_released_buffer_takes_the_next_save():
    pool = StatePool()
    blob = pool.take(3 * GRANULE + 5)
    buf = blob.buf
    assert len(buf) == 4 * GRANULE  # whole MiB, so near sizes share buffers
    blob.release()
    again = pool.take(3 * GRANULE + 100)
    assert again.buf is buf and pool.reused == 1 and pool.allocated == 1


def test_a_buffer_held_elsewhere_is_not_reused():
    pool = StatePool()
    blob = pool.take(GRANULE)
    blob.retain()  # e.g. the disk writer
    blob.release()  # the host entry went
    assert pool.take(GRANULE).buf is not blob.buf  # still being written: a fresh one
    blob.release()
    assert pool.take(GRANULE).buf is blob.buf
    with pytest.raises(RuntimeError):
        blob.release()  # released twice


def test_much_larger_buffers_are_not_wasted_on_small_states():
    pool = StatePool()
    big = pool.take(10 * GRANULE)
    big.release()
    assert pool.take(GRANULE).buf is not big.buf


def test_the_pool_keeps_at_most_its_bound():
    pool = StatePool(max_free_bytes=2 * GRANULE)
    blobs = [pool.take(GRANULE) for _ in range(4)]
    for b in blobs:
        b.release()
    assert pool.free_bytes <= 2 * GRANULE


def test_host_cache_eviction_recycles_buffers_for_new_entries():
    cache = HostCache(budget_bytes=2 * GRANULE)
    for i in range(6):
        blob = cache.pool.take(GRANULE)
        blob.n_bytes = GRANULE
        cache.store("", TokenSequence([100 + i, 1, 2]), blob)
    assert len(cache.entries) == 2 and cache.bytes_used == 2 * GRANULE
    assert cache.pool.allocated == 3 and cache.pool.reused == 3  # steady state: no fresh pages
    assert bytes(cache.best("", TokenSequence([105, 1, 2]))[0].data) == bytes(GRANULE)


def test_warm_makes_ready_a_buffer_for_each_expected_save_a_piece_at_a_time():
    pool = StatePool()
    sizes = [3 * WARM_PIECE + 5, GRANULE // 2]
    calls = 0
    while pool.warm(sizes):
        calls += 1
    # 4 pieces for the first (whole MiB), 1 for the second; then nothing to do
    assert calls == 5 and pool.warmed == 2 and not pool.warm(sizes)
    first, second = pool.take(sizes[0]), pool.take(sizes[1])
    assert pool.reused == 2 and pool.allocated == 0
    assert len(first.buf) == 3 * WARM_PIECE + GRANULE and len(second.buf) == GRANULE // 2
    assert bytes(first.buf[-3:]) == bytes(3)  # every byte written (zeros), mapped


def test_a_save_takes_a_buffer_still_being_warmed():
    pool = StatePool()
    assert pool.warm([2 * WARM_PIECE])  # one piece of two
    blob = pool.take(2 * WARM_PIECE)
    assert pool.reused == 1 and pool.allocated == 0
    assert not pool.warm([])  # nothing left half done
    blob.release()
    assert not pool.warm([2 * WARM_PIECE])  # the released buffer serves it


def test_warm_stays_within_the_bound_on_free_bytes():
    pool = StatePool(max_free_bytes=2 * GRANULE)
    assert not pool.warm([3 * GRANULE]) and pool.free_bytes == 0
    while pool.warm([GRANULE, GRANULE, GRANULE]):
        pass
    assert pool.warmed == 2 and pool.free_bytes == 2 * GRANULE
