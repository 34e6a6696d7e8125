"""A compact set of the checkpoint IDs that some checkpoint links to, kept between timer runs.

The sweep's first phase lists every checkpoint and adds the ones it links to (its parent,
and for a fork the head it replaced). In the second phase only checkpoints *not* in the
set are candidates: what another checkpoint resumed from, or a fork replaced, was once a
head, so only a leaf can be a lost race's leftover. The set only narrows the candidates;
whether a candidate is deleted is still decided by the fenced walk from its thread's head.

It is a scalable Bloom filter: a lookup may say "linked" for an ID that is not (about 0.3%
per slice, with a fresh salt each pass), which only leaves that orphan for a later pass; it
never says "not linked" for one that is. Each slice holds twice as many IDs as the one
before, so no size has to be known up front. About 1.5 bytes per ID: one million linked
checkpoints make a 1.5 MB blob.
"""

from __future__ import annotations

import hashlib
import os
import struct

BITS_PER_ITEM = 12
HASHES = 8
FIRST_CAPACITY = 1 << 16
_MAGIC = b"RFv1"
_SALT_BYTES = 16
_HEADER = struct.Struct(">4s16sI")
_SLICE = struct.Struct(">QQ")


class _Slice:
    __slots__ = ("bits", "capacity", "count")

    def __init__(self, capacity: int, count: int = 0, bits: bytearray | None = None) -> None:
        self.capacity = capacity
        self.count = count
        self.bits = bits if bits is not None else bytearray(capacity * BITS_PER_ITEM // 8)

    def positions(self, h1: int, h2: int) -> list[int]:
        size = len(self.bits) * 8
        return [(h1 + i * h2) % size for i in range(HASHES)]

    def has(self, h1: int, h2: int) -> bool:
        return all(self.bits[p >> 3] & (1 << (p & 7)) for p in self.positions(h1, h2))

    def add(self, h1: int, h2: int) -> None:
        for p in self.positions(h1, h2):
            self.bits[p >> 3] |= 1 << (p & 7)
        self.count += 1


class ReferenceFilter:
    def __init__(self, salt: bytes, slices: list[_Slice]) -> None:
        self._salt = salt
        self._slices = slices

    @classmethod
    def empty(cls) -> ReferenceFilter:
        return cls(os.urandom(_SALT_BYTES), [_Slice(FIRST_CAPACITY)])

    def _hash(self, checkpoint_id: str) -> tuple[int, int]:
        digest = hashlib.blake2b(checkpoint_id.encode(), digest_size=16, key=self._salt).digest()
        return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big") | 1

    def add(self, checkpoint_id: str) -> None:
        last = self._slices[-1]
        if last.count >= last.capacity:
            last = _Slice(last.capacity * 2)
            self._slices.append(last)
        last.add(*self._hash(checkpoint_id))

    def __contains__(self, checkpoint_id: object) -> bool:
        if not isinstance(checkpoint_id, str):
            return False
        h1, h2 = self._hash(checkpoint_id)
        return any(part.has(h1, h2) for part in self._slices)

    def __len__(self) -> int:
        return sum(part.count for part in self._slices)

    def to_bytes(self) -> bytes:
        parts = [_HEADER.pack(_MAGIC, self._salt, len(self._slices))]
        for part in self._slices:
            parts += [_SLICE.pack(part.capacity, part.count), bytes(part.bits)]
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> ReferenceFilter:
        """``ValueError`` for anything this class did not write."""
        try:
            magic, salt, count = _HEADER.unpack_from(data)
            offset = _HEADER.size
            slices: list[_Slice] = []
            for _ in range(count):
                capacity, items = _SLICE.unpack_from(data, offset)
                offset += _SLICE.size
                size = capacity * BITS_PER_ITEM // 8
                if capacity < FIRST_CAPACITY or offset + size > len(data):
                    raise ValueError("a slice runs past the end")
                slices.append(_Slice(capacity, items, bytearray(data[offset : offset + size])))
                offset += size
        except struct.error as exc:
            raise ValueError("truncated reference filter") from exc
        if magic != _MAGIC or not slices or offset != len(data):
            raise ValueError("not a reference filter")
        return cls(salt, slices)
