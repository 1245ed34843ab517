"""HTTP plumbing shared by the REST handlers: JSON in, Discord-style JSON out, errors as 4xx.

discord.py decides whether a body is JSON by comparing ``Content-Type`` with ``==``
(``discord/http.py json_or_text``), so responses carry exactly ``application/json`` and never
aiohttp's ``; charset=utf-8`` variant.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import BodyPartReader, web

from openab_voice.errors import EmulatorError, ErrorCode, RestError, WireError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Discord JSON error codes (https://discord.com/developers/docs/topics/opcodes-and-status-codes).
CODE_GENERAL = 0
CODE_UNKNOWN_CHANNEL = 10003
CODE_UNKNOWN_MESSAGE = 10008
CODE_UNKNOWN_WEBHOOK = 10015
CODE_UNKNOWN_APPLICATION = 10002
CODE_UNKNOWN_INTERACTION = 10062
CODE_UNAUTHORIZED = 40001
CODE_ALREADY_ACKNOWLEDGED = 40060
CODE_EMPTY_MESSAGE = 50006
CODE_INVALID_FORM_BODY = 50035
CODE_INVALID_JSON = 50109

_BY_EMULATOR_CODE: dict[str, tuple[int, int]] = {
    ErrorCode.EMULATOR_UNKNOWN_CHANNEL: (404, CODE_UNKNOWN_CHANNEL),
    ErrorCode.EMULATOR_UNKNOWN_MESSAGE: (404, CODE_UNKNOWN_MESSAGE),
    ErrorCode.EMULATOR_UNKNOWN_USER: (404, 10013),
}


def json_response(data: Any, *, status: int = 200) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(data).encode(), headers={"Content-Type": "application/json"}
    )


def no_content() -> web.Response:
    return web.Response(status=204)


def error_response(status: int, discord_code: int, message: str) -> web.Response:
    return json_response({"code": discord_code, "message": message}, status=status)


@web.middleware
async def discord_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure of a handler into a structured JSON error; never let one escape."""
    try:
        return await handler(request)
    except RestError as exc:
        return error_response(exc.status, exc.discord_code, exc.message)
    except WireError as exc:
        return error_response(400, CODE_INVALID_FORM_BODY, f"Invalid Form Body: {exc.message}")
    except EmulatorError as exc:
        status, code = _BY_EMULATOR_CODE.get(exc.code, (400, CODE_GENERAL))
        return error_response(status, code, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, CODE_GENERAL, f"{exc.status}: {exc.reason}")
    except Exception:  # the emulator's own bug: report it, answer 500, keep serving
        log.exception("emulator REST handler failed for %s %s", request.method, request.path)
        return error_response(500, CODE_GENERAL, "500: Internal Server Error")


@dataclass(frozen=True, slots=True)
class Upload:
    """A file the bot attached to a message (a ``files[n]`` part of a multipart upload)."""

    filename: str
    content_type: str
    data: bytes


async def read_json(request: web.Request) -> Any:
    """The request body as JSON: a JSON body, or the ``payload_json`` part of a multipart upload.

    Raises:
        RestError: 400 / 50109 for a body that is not valid JSON.
    """
    return (await read_upload(request))[0]


async def read_upload(request: web.Request) -> tuple[Any, list[Upload]]:
    """The request body as JSON, and the files of a multipart upload (none for a JSON body).

    Raises:
        RestError: 400 / 50109 for a body that is not valid JSON.
    """
    if request.content_type.startswith("multipart/"):
        return await _read_multipart(request)
    raw = await request.read()
    if not raw:
        return {}, []
    try:
        return json.loads(raw), []
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RestError(400, CODE_INVALID_JSON, "The request body contains invalid JSON.") from None


async def _read_multipart(request: web.Request) -> tuple[Any, list[Upload]]:
    # discord.py sends files as multipart with the JSON in a part named "payload_json" and each file
    # in a part named "files[n]" (discord/http.py handle_message_parameters).
    try:
        reader = await request.multipart()
        payload: Any = {}
        uploads: list[Upload] = []
        while (part := await reader.next()) is not None:
            if isinstance(part, BodyPartReader) and part.name == "payload_json":
                payload = json.loads(await part.text())
            elif isinstance(part, BodyPartReader) and (part.name or "").startswith("files["):
                content_type = part.headers.get("Content-Type", "application/octet-stream")
                uploads.append(Upload(part.filename or "file", content_type, bytes(await part.read())))
            elif isinstance(part, BodyPartReader):
                await part.release()
        return payload, uploads
    except (ValueError, UnicodeDecodeError) as exc:
        raise RestError(400, CODE_INVALID_JSON, f"The request body contains invalid JSON: {exc}") from None


def snowflake(request: web.Request, name: str) -> int:
    """A numeric path parameter.

    Raises:
        RestError: 404 for a non-numeric id (Discord answers unknown routes that way too).
    """
    raw = request.match_info.get(name, "")
    if not raw.isdigit():
        raise RestError(404, CODE_GENERAL, "404: Not Found")
    return int(raw)
