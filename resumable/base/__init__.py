"""Shared pieces every other part of the library uses, importing nothing of it: the
typed errors (each with its stable code), ID validation, strict JSON, cleanup that survives
cancellation, tracing, a call's task owner, and the mapping of foreign errors at the edge.
"""
