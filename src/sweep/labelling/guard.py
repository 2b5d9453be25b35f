"""What every request to the labelling app and every answer passes: a body limit, writes from its own page only, no framing.

- **Body limit.** A request body over `MAX_BODY` (1 MiB, far above any question, filters or
  evidence excerpt a labeller types or selects) is refused with HTTP 413 and a message before
  any route runs: nothing is read past the limit and nothing is written.
- **Writes from the app's own page only.** A write (any method but GET, HEAD, OPTIONS) whose
  `Origin` is not the app's own address (`http://127.0.0.1:PORT` or `http://localhost:PORT`, as
  the page was opened) is refused with HTTP 403 and a message, before the body is read. Browsers
  send `Origin` with every write, so another site's page (or a sandboxed frame, `Origin: null`)
  cannot change the file. A request without `Origin` is not a browser's: curl or a script on
  this machine, which could edit the file directly anyway; it is accepted.
- **Every answer** says `X-Frame-Options: DENY` and a Content-Security-Policy with
  `frame-ancestors 'none'` (no page can frame the app, so no click in a disguised frame can
  grade), that allows the page's own inline script and style (by their hashes) and requests to
  the app only, nothing else; and `X-Content-Type-Options: nosniff`.
"""

from __future__ import annotations

import base64
import hashlib
import re

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

MAX_BODY = 1024 * 1024  # bytes
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def content_security_policy(page: str) -> str:
    """The policy for `page` (HTML whose script and style are inline `<script>` and `<style>`
    elements without attributes): those elements by hash, fetches to the app, nothing else."""

    def hashes(tag: str) -> str:
        bodies = re.findall(rf"<{tag}>(.*?)</{tag}>", page, flags=re.DOTALL)
        digests = (base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() for body in bodies)
        return " ".join(f"'sha256-{digest}'" for digest in digests) or "'none'"

    return "; ".join(
        (
            "default-src 'none'",
            f"script-src {hashes('script')}",
            f"style-src {hashes('style')}",
            "connect-src 'self'",
            "img-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        )
    )


def guard(app: Flask, page: str) -> None:
    """Apply the module's rules to `app`, which serves `page`."""
    # werkzeug refuses a Content-Length over this and cuts a streamed (chunked) body there: one
    # byte more than MAX_BODY tells a body over the limit from one that ends at it
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY + 1
    policy = content_security_policy(page)

    @app.before_request
    def own_page_writes_within_limit() -> tuple[Response, int] | None:
        origin = request.headers.get("Origin")
        own = request.host_url.rstrip("/")
        if request.method not in SAFE_METHODS and origin is not None and origin != own:
            message = (
                f"refused: a change sent from another page ({origin}); the app takes changes only from "
                f"its own page, {own}/"
            )
            return jsonify(error=message), 403
        if len(request.get_data()) > MAX_BODY:  # the whole body now, whatever its type
            raise RequestEntityTooLarge()
        return None

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(error: RequestEntityTooLarge) -> tuple[Response, int]:
        size = f" ({request.content_length:,} bytes)" if request.content_length else ""
        message = (
            f"Not saved: the request{size} is over the app's limit of {MAX_BODY:,} bytes ({MAX_BODY / 2**20:g} MiB) for one "
            "change; nothing was written"
        )
        return jsonify(error=message), 413

    @app.after_request
    def headers(response: Response) -> Response:
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = policy
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response
