"""Read-only view of the worker's shared-memory ring (PROTOCOL.md, "Shared-memory ring")."""
from __future__ import annotations

import mmap
import os
import struct
from typing import Optional

from .errors import ProtocolViolation, WorkerError, ErrorCode

MAGIC = b"RWKVDSHM"
VERSION = 1
HEADER = struct.Struct("<8sIIQQQIII12x")  # 64 bytes
SLOT = struct.Struct("<QIIQQ")  # 32 bytes: lease, generation, state, offset, bytes


class Ring:
    """A worker's ring segment mapped read-only: arrays viewing it cannot write to it."""

    def __init__(self, name: str) -> None:
        path = os.path.join("/dev/shm", name)
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self.mm = mmap.mmap(fd, size, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        (magic, version, header_bytes, total, data_offset, data_bytes, n_slots, slot_bytes,
         pid) = HEADER.unpack_from(self.mm, 0)
        if (magic != MAGIC or version != VERSION or header_bytes != HEADER.size
                or slot_bytes != SLOT.size or total > size or data_offset + data_bytes > size):
            raise ProtocolViolation(f"{path} is not an rwkvd v{VERSION} ring")
        self.name = name
        self.n_slots = n_slots
        self.data_offset = data_offset
        self.data_bytes = data_bytes
        self.pid = pid

    def check(self, ref: dict) -> None:
        """Raise unless the slot table still holds this lease at this generation."""
        slot = ref["slot"]
        if slot >= self.n_slots:
            raise ProtocolViolation(f"slot {slot} outside the ring")
        lease, generation, state, offset, _ = SLOT.unpack_from(self.mm, HEADER.size + slot * SLOT.size)
        if (state != 1 or lease != ref["lease"] or generation != ref["generation"]
                or offset != ref["offset"]):
            raise WorkerError(ErrorCode.UNKNOWN_LEASE, "unknown_lease",
                              f"lease {ref['lease']} is no longer current")
        if offset < self.data_offset or offset + ref["bytes"] > self.data_offset + self.data_bytes:
            raise ProtocolViolation("shm reference outside the data area")


def open_ring(name: Optional[str]) -> Optional[Ring]:
    """The ring, or None when it cannot be mapped (another host or user: tensors come inline)."""
    if not name:
        return None
    try:
        return Ring(name)
    except (OSError, ProtocolViolation):
        return None
