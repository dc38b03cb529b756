"""A kept encoding is the encoder's own, and later encodings never rewrite it (store/kept.py). What a thread's state
costs in memory is measured by `python -m bench.kept_bytes`, not here: the unit layer measures no memory."""

from __future__ import annotations

import msgspec

from store.kept import KeptEncoder


def test_encodings_are_the_encoders_own_and_none_rewrites_another():
    encoder = KeptEncoder(msgspec.json.Encoder())
    values = [{"text": "y" * size, "n": size} for size in (10, 700, 3000, 40)]
    kept = [encoder.encode(value) for value in values]
    assert kept == [msgspec.json.encode(value) for value in values]
    assert all(type(item) is bytes for item in kept)  # a copy, never the reused buffer itself
