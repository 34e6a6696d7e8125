"""Threads in storage: the pointer blob naming a thread's head (moved by compare-and-swap,
fenced for deletion), its history and metadata, deleting a thread whole, and the
housekeeping that sweeps lost races' checkpoints and keeps recent lineage alive. Running a
turn on a thread is the core's job (``core.thread_turns``).
"""
