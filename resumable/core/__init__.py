"""The resume core: one call resumed in one workflow run. ``prepare_run`` validates and
hydrates a checkpoint without running anything (``resume``); ``RunService`` loads, runs
and saves; ``ThreadRunner`` does it on a thread's head; ``RunOwner`` owns a call's whole
lifetime behind the ``Claim`` it settles (an Idempotency-Key claim: ``idempotency``).
"""
