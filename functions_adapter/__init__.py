"""The Azure Functions HTTP adapter over the ``resumable`` library.

It parses requests (``request_body``), checks signatures (``signatures``), reads the app
settings (``settings``) and builds the library's objects from them (``wiring``), hands
each call to a ``resumable.RunOwner`` (``routes``), maps error types to statuses in one
table (``status_map``), renders JSON and SSE (``responses``, ``sse``) and traces each
request (``request_trace``, ``telemetry``). ``function_app.py`` only lists the triggers.
"""
