"""`POST /extensions/iac-code/v1/executions/{executionId}/cancel`: cancel a running or interrupted execution."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Request, Response, post
from litestar.params import FromPath
from msgspec import Meta

from gateway.errors import ErrorCode, GatewayError
from gateway.i18n import negotiate
from gateway.protocol.input import MAX_ID_LENGTH
from gateway.protocol.validate import check_depth, error_from_msgspec
from transports.http_input import authenticate, caller_of, check_media_type, header, read_body
from transports.render import json_error
from transports.services import Services

MAX_CANCEL_BODY = 64 * 1024


class CancelRequest(msgspec.Struct, rename="camel"):
    thread_id: Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH)]
    ros_invocation_id: Annotated[str, Meta(min_length=1, max_length=256)]
    user_id: Annotated[str, Meta(max_length=MAX_ID_LENGTH)] | None = None  # must match the thread's userId binding


_decoder = msgspec.json.Decoder(CancelRequest)


@post("/extensions/iac-code/v1/executions/{execution_id:str}/cancel", request_max_body_size=None, status_code=200)
async def cancel_execution(request: Request, execution_id: FromPath[str], services: Services) -> Response:
    language = negotiate(None, header(request, "accept-language"))
    try:
        principal = await authenticate(request, services)
        check_media_type(request)
        body = await read_body(request, MAX_CANCEL_BODY, services.settings.body_timeout_seconds)
        check_depth(body)
        try:
            wanted = _decoder.decode(body)
        except msgspec.MsgspecError as exc:
            raise error_from_msgspec(exc) from None
        if len(execution_id) > MAX_ID_LENGTH:
            raise GatewayError(ErrorCode.EXECUTION_NOT_FOUND)  # no execution id is that long
        status = await services.engine.cancel(
            wanted.thread_id, execution_id, wanted.ros_invocation_id, caller_of(principal), wanted.user_id
        )
    except GatewayError as error:
        return json_error(error, language)
    return Response({"executionId": execution_id, "status": status.value}, status_code=200)
