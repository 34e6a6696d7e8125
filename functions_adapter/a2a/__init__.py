"""A2A (the a2aproject Agent2Agent protocol, v1.0 JSON-RPC binding): every hosted workflow an agent.

``route`` serves the agent card and the JSON-RPC endpoint; ``messages`` turns a message into
a turn (the synchronous turn itself, or a background run); ``task_reads`` and ``task_list``
read tasks back (``task_turns`` finds a task's latest turn from its checkpoints, named as
``task_ids`` says); ``tasks`` renders runs and turns as A2A tasks; ``turn_call`` is the one
seam into the shared turn path.
"""
