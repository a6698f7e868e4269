"""Anthropic messages API through the official SDK."""
from __future__ import annotations

from .errors import ProviderResponseError
from .sdk_provider import SDKProvider
from .types import CompletionRequest, Usage

#: Anthropic's stop reasons mapped onto the normalised finish reasons of `Completion`.
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


class AnthropicProvider(SDKProvider):
    name = "anthropic"

    def _sdk(self):
        import anthropic  # noqa: PLC0415 -- the SDK is heavy to import (pydantic models): loaded when the first client is made, not when a spec is parsed

        return anthropic

    def _make_client(self):
        return self._sdk().AsyncAnthropic(api_key=self._api_key, base_url=self.base_url,
                                          max_retries=0, timeout=self.config.timeout_s)

    async def _create(self, client, params: dict):
        return await client.messages.create(**params)

    def _params(self, request: CompletionRequest) -> dict:
        """System messages go into the top-level `system` field, as the messages API requires.
        No temperature is sent unless the model's options ask for it (`send_temperature = true`):
        the SDK no longer takes one, so it then travels in the raw body."""
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        turns = [{"role": m.role, "content": m.content}
                 for m in request.messages if m.role != "system"]
        if not turns:  # a system-only prompt: send it as the user turn
            turns, system = [{"role": "user", "content": system}], ""
        params = {"model": self.model, "messages": turns, "max_tokens": request.max_tokens}
        if system:
            params["system"] = system
        if request.stop:
            params["stop_sequences"] = list(request.stop)
        options = self.config.options_for(self.model)
        extra = dict(options.extra_body)
        if options.send_temperature:  # current SDKs dropped the parameter; older models accept it
            extra["temperature"] = request.temperature
        if extra:
            params["extra_body"] = extra
        return params

    def _read(self, response) -> tuple[str, Usage, str | None, str | None]:
        content = getattr(response, "content", None)
        if not isinstance(content, list):
            raise ProviderResponseError(
                f"{self.spec}: the response holds no content "
                f"(got {type(response).__name__}: {str(response)[:200]!r})", self.name)
        text = "".join(getattr(block, "text", "") or "" for block in content
                       if getattr(block, "type", None) == "text")
        usage = getattr(response, "usage", None)
        tokens = Usage(int(getattr(usage, "input_tokens", 0) or 0),
                       int(getattr(usage, "output_tokens", 0) or 0))
        stop = getattr(response, "stop_reason", None)
        return text, tokens, FINISH_REASONS.get(stop, stop), getattr(response, "model", None)
