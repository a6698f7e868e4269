"""Turn exceptions of the openai / anthropic SDKs into kernelwright errors.

Both SDKs share one shape (APIStatusError with `.status_code` and `.response`, APITimeoutError,
APIConnectionError, APIResponseValidationError), so one classifier serves both; it receives the
SDK module so neither SDK is imported here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from types import ModuleType

from .errors import (ProviderAuthError, ProviderError, ProviderRequestError,
                     ProviderResponseError, ProviderUnavailable)
from .redact import redact_text
from .retry import Failure, parse_retry_after

#: Statuses worth retrying: timeouts, conflicts, too-early, rate limits, server errors,
#: Anthropic's 529 "overloaded".
RETRYABLE_STATUS = {408, 409, 425, 429}


@dataclass
class CallContext:
    """What a message needs to say which call failed, and which secrets to scrub from it."""

    provider: str
    spec: str
    key_source: str  # e.g. "OPENAI_API_KEY" - named in auth errors so the fix is obvious
    secrets: list[str]


def classify_sdk_error(exc: BaseException, sdk: ModuleType, ctx: CallContext) -> Failure:
    def scrub(text: str) -> str:
        return redact_text(text, ctx.secrets)[:500]

    def unavailable(message: str) -> Failure:
        return Failure(ProviderUnavailable(f"{ctx.spec}: {message}", ctx.provider), True)

    if isinstance(exc, sdk.APIStatusError):
        return _classify_status(exc, ctx, scrub)
    if isinstance(exc, sdk.APITimeoutError):
        return unavailable("request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {type(cause).__name__}: {scrub(str(cause))}" if cause else ""
        return unavailable(f"connection failed or the response was cut off{detail}")
    if isinstance(exc, ProviderResponseError):  # raised by a provider's own shape check
        return Failure(exc, True)
    if isinstance(exc, (sdk.APIResponseValidationError, json.JSONDecodeError, UnicodeDecodeError)):
        return Failure(ProviderResponseError(
            f"{ctx.spec}: the endpoint's answer is not a valid response "
            f"({type(exc).__name__}: {scrub(str(exc))})", ctx.provider), True)
    return Failure(ProviderError(f"{ctx.spec}: unexpected {type(exc).__name__}: {scrub(str(exc))}",
                                 ctx.provider), False)


def _classify_status(exc, ctx: CallContext, scrub) -> Failure:
    status = exc.status_code
    detail = scrub(_server_message(exc))
    if status in (401, 403):
        what = "rejected the API key" if status == 401 else "denied access"
        return Failure(ProviderAuthError(
            f"{ctx.spec} {what} (HTTP {status}): {detail}. Check {ctx.key_source}; "
            "this is not retried.", ctx.provider, status), False)
    if status in RETRYABLE_STATUS or status >= 500:
        headers = {k.lower(): v for k, v in exc.response.headers.items()}
        error = ProviderUnavailable(f"{ctx.spec}: HTTP {status}: {detail}", ctx.provider, status)
        return Failure(error, True, parse_retry_after(headers))
    hint = " (is the model name right for this endpoint?)" if status == 404 else ""
    return Failure(ProviderRequestError(
        f"{ctx.spec} rejected the request (HTTP {status}): {detail}{hint}; this is not retried.",
        ctx.provider, status), False)


def _server_message(exc) -> str:
    """The server's own error text when the body has one, else the SDK's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if isinstance(error, str):
            return error[:500]
    return str(exc)[:500]
