"""A2A (the a2aproject Agent2Agent protocol, v1.0 JSON-RPC binding): every hosted workflow an agent.

``route`` serves the agent card and the JSON-RPC endpoint; ``tasks`` maps our run documents to
A2A tasks; ``turn_call`` is the one seam into the shared turn path.
"""
