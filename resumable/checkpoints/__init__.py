"""Checkpoints as immutable, create-only blobs: the codec (JSON plus pickles decoded by a
restricted unpickler: ``pickle_guard`` and its allowlist, machine and opcode table), the
optional MAC, the metadata kept beside a blob, the ``CheckpointStore`` protocol with its two
implementations (``BlobCheckpointStorage``, ``MemoryCheckpointStore``), and the one module
that touches Agent Framework's private API (``af_internals``).
"""
