"""Blob and Queue Storage: clients (one per process), the translation of SDK failures
into what a caller should do (503 / 500), small JSON records, the typed ``RecordStore``
with its one compare-and-swap ``update`` (a lost answer is not a conflict), where every
kind of blob lives (``layout``), and the run queue.
"""
