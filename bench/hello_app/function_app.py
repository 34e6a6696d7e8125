"""The fair floor for cold start: a hello-world function app on the same HTTP streaming
extension as the real one (``bench/cold_start.py`` times ``import function_app`` of both).

The extension is what the worker needs imported to stream HTTP responses, and it brings
fastapi, starlette and uvicorn; an app that streams cannot start faster than this.
"""

import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, StreamingResponse

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.route(route="hello", methods=["POST"])
async def hello(req: Request) -> StreamingResponse:
    """Stream a greeting back, as the real app streams a run's events."""

    async def events():  # noqa: ANN202 - the smallest streaming body
        yield b"data: hello\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")
