"""A fake OpenAI-compatible HTTP endpoint on a real local port (aiohttp's ``TestServer``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from aiohttp import web
from aiohttp.test_utils import TestServer


@asynccontextmanager
async def serve_post(
    path: str, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> AsyncIterator[str]:
    """Serve ``handler`` for POSTs to ``/v1{path}``; yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    app = web.Application()
    app.router.add_post(f"/v1{path}", handler)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield f"http://127.0.0.1:{test_server.port}/v1"
    finally:
        await test_server.close()
