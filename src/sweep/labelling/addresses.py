"""Ids in the labelling app's addresses: any question or document id, percent-encoded, reaches its route whole.

A question id is one segment of the path (`/api/questions/<qid>/grade`), percent-encoded as the
page's `encodeURIComponent` encodes it, so an id with `/`, `?`, `#`, `%`, spaces or any other
character is one segment. The WSGI server decodes the path before routing, which would make
`a%2Fb` two segments; `encoded_paths` routes on the path as the client sent it instead, each
segment percent-encoded again (`%2F` stays inside its segment), and the converters `qid` and
`doc` decode a segment once. A document id may also be sent with its `/` unencoded
(`/api/documents/hr/leave.md`).

`.` and `..` are the two ids no address can carry (browsers and HTTP clients drop such segments
before sending), so the app refuses them as question ids: when one is added, and in the golden
file it is started on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, unquote, unquote_to_bytes, urlsplit

from flask import Flask
from werkzeug.routing import BaseConverter, PathConverter

from sweep.errors import InputError

DOT_SEGMENTS = (".", "..")


class QuestionId(BaseConverter):
    """One path segment, decoded: any question id."""

    def to_python(self, value: str) -> str:
        return unquote(value)


class DocumentId(PathConverter):
    """The rest of the path, decoded: a document id, its `/` encoded or not."""

    def to_python(self, value: str) -> str:
        return unquote(value)


def encoded_paths(wsgi_app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """`wsgi_app` routed on the path the client sent (RAW_URI, which werkzeug's server and test
    client set; else the decoded PATH_INFO), each segment percent-encoded."""

    def routed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
        if raw:
            path = raw.partition("?")[0]
            if not path.startswith("/"):  # the absolute form, http://host/path
                path = urlsplit(path).path
            segments = [unquote_to_bytes(s) for s in path.encode("latin-1").split(b"/")]
        else:
            segments = environ.get("PATH_INFO", "").encode("latin-1").split(b"/")
        environ["PATH_INFO"] = "/".join(quote(s, safe="") for s in segments)
        return wsgi_app(environ, start_response)

    return routed


def route_any_id(app: Flask) -> None:
    """Let `app`'s routes take `<qid:...>` and `<doc:...>` (module doc)."""
    app.url_map.converters["qid"] = QuestionId
    app.url_map.converters["doc"] = DocumentId
    app.wsgi_app = encoded_paths(app.wsgi_app)  # type: ignore[method-assign]


def check_addressable(qid: str, at: str) -> None:
    if qid in DOT_SEGMENTS:
        raise InputError(
            f"{at}: question id {qid!r} cannot be opened in the labelling app (browsers drop '.' and '..' "
            "from addresses): choose another id"
        )
