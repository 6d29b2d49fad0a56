"""The page at ``/ui``: static files from ``page/`` beside this module (no build step, nothing fetched from elsewhere).

The page itself is public, like ``/health``: it holds no data. What it does goes through the API routes, which
check the token the user types into the page (kept in the page's memory only). A strict Content-Security-Policy
keeps the page to its own scripts and its own server.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

UI_DIR = Path(__file__).resolve().parent / "page"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; connect-src 'self' ws: wss:; media-src 'self' blob:; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class UiFiles(StaticFiles):
    """The page's files, each answer with :data:`SECURITY_HEADERS`."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(SECURITY_HEADERS)
        return response


def ui_files() -> UiFiles:
    return UiFiles(directory=UI_DIR, html=True)


async def ui_redirect(request: Request) -> Response:
    """``/ui`` -> ``/ui/`` (the page's relative links resolve under the folder)."""
    return RedirectResponse(request.url.replace(path="/ui/"), status_code=308)
