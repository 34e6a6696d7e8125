"""Atomic resume of Agent Framework workflows from checkpoints in Azure Blob Storage.

The request flow, one module per step:
HTTP (``function_app``) → parse (``run_request``) → load (``blob_store``)
→ resume (``atomic_resume``) → save (``blob_store``) → respond (``run_result``, ``sse``).
"""

__version__ = "0.1.0"
