"""``POST /api/adapters/github``: an issue comment becomes a background turn on its issue's thread.

Registered when ``GITHUB_WEBHOOK_SECRET`` is set. A new comment (``issue_comment``, action
``created``) by a person becomes a turn on ``github.<owner>.<repo>.<issue number>``, keyed
by ``X-GitHub-Delivery`` (refused without one); a comment by a bot or through a GitHub App,
and every other event, ``ping`` included, is 204.
GitHub signs the body only: no timestamp, and not that header. A captured delivery
therefore verifies forever; sent again as it was, within the dedupe window, it replays the
first 202, but with a new delivery ID it is a new turn. The signature (over the body) and
the dedupe window are the whole protection.

The route is anonymous (no function key): the signature is its authentication, checked
before the body is parsed or storage is touched, and GitHub's webhook settings then show
no key in the URL.
"""

from __future__ import annotations

from typing import Any

import azure.functions as func
from azurefunctions.extensions.http.fastapi import Request, Response

from functions_adapter.request_trace import traced
from functions_adapter.thread_names import derived_thread_id, origin_for
from functions_adapter.webhooks.common import Delivery, parsed, start_turn, verified_body
from resumable.base import InvalidRequest

bp = func.Blueprint()


def github_turn(event: dict[str, Any]) -> Delivery | None:
    """A new issue comment as a turn on its issue's thread, or None for anything else.

    The thread is ``github.<owner>.<repo>.<issue>`` (``thread_names``: injective, so
    ``a-b/c#1`` and ``a/b-c#1`` are two threads); the origin is the repository's ID.
    """
    if event.get("action") != "created" or "comment" not in event or "issue" not in event:
        return None
    if _by_a_bot(event):
        return None
    try:
        repository, number = event["repository"], event["issue"]["number"]
        owner, slash, name = str(repository["full_name"]).partition("/")
        repository_id, text = repository["id"], str(event["comment"]["body"])
    except (KeyError, TypeError):
        raise InvalidRequest("An issue_comment delivery needs repository, issue and comment.") from None
    if not slash or type(number) is not int or type(repository_id) is not int:
        raise InvalidRequest("An issue_comment delivery needs repository.full_name, repository.id and issue.number.")
    return Delivery(derived_thread_id("github", owner, name, number), text, origin_for("github", repository_id))


def _by_a_bot(event: dict[str, Any]) -> bool:
    """A comment by a bot account or made through a GitHub App: never a turn. A receiver that
    replies as a GitHub App (as documented) would otherwise answer its own replies forever."""
    comment, sender = event.get("comment"), event.get("sender")
    comment = comment if isinstance(comment, dict) else {}
    user = comment.get("user") if isinstance(comment.get("user"), dict) else {}
    return (
        comment.get("performed_via_github_app") is not None
        or user.get("type") == "Bot"
        or (isinstance(sender, dict) and sender.get("type") == "Bot")
    )


async def _deliver(req: Request) -> Response:
    body = await verified_body(req, "GITHUB_WEBHOOK_SECRET", "github")
    if req.headers.get("x-github-event") != "issue_comment":
        return Response(status_code=204)  # ping, pushes, ...: nothing to do
    turn = github_turn(parsed(body))
    if turn is None:
        return Response(status_code=204)  # an edited or deleted comment
    delivery = req.headers.get("x-github-delivery", "").strip()
    if not delivery:  # the only thing a replay is recognised by
        raise InvalidRequest("A GitHub delivery must carry X-GitHub-Delivery.")
    # 202 at once (the turn runs from the queue), well inside GitHub's 10 s.
    return await start_turn(turn, key=delivery)


@bp.route(route="adapters/github", methods=["POST"], auth_level=func.AuthLevel.ANONYMOUS)
async def github_adapter(req: Request) -> Response:
    """A GitHub webhook (issue comments) becomes a background turn; 202 within the deadline."""
    return await traced(req, "adapters/github", lambda: _deliver(req))
