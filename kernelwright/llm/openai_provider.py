"""OpenAI chat completions through the official SDK, for OpenAI itself and every OpenAI-compatible
server (vLLM, SGLang, Ollama, OpenRouter, DeepSeek)."""
from __future__ import annotations

from .errors import ProviderResponseError
from .keys import is_vendor_host
from .sdk_provider import SDKProvider
from .types import CompletionRequest, Usage

#: Model families that reject a `temperature` (they sample at a fixed one); config may override.
FIXED_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")


class OpenAIProvider(SDKProvider):
    name = "openai"

    def _sdk(self):
        import openai  # noqa: PLC0415 -- the SDK is heavy to import (pydantic models): loaded when the first client is made, not when a spec is parsed

        return openai

    def _make_client(self):
        return self._sdk().AsyncOpenAI(api_key=self._api_key, base_url=self.base_url,
                                       max_retries=0, timeout=self.config.timeout_s)

    async def _create(self, client, params: dict):
        return await client.chat.completions.create(**params)

    def _params(self, request: CompletionRequest) -> dict:
        """OpenAI itself wants `max_completion_tokens`; compatible servers know `max_tokens`."""
        options = self.config.options_for(self.model)
        params = {"model": self.model,
                  "messages": [{"role": m.role, "content": m.content} for m in request.messages]}
        send_temperature = options.send_temperature
        if send_temperature is None:
            send_temperature = not self.model.startswith(FIXED_TEMPERATURE_PREFIXES)
        if send_temperature:
            params["temperature"] = request.temperature
        official = is_vendor_host(self.base_url, self.vendor)
        field = options.max_tokens_field or ("max_completion_tokens" if official else "max_tokens")
        params[field] = request.max_tokens
        if request.stop:
            params["stop"] = list(request.stop)
        if options.extra_body:
            params["extra_body"] = dict(options.extra_body)
        return params

    def _read(self, response) -> tuple[str, Usage, str | None, str | None]:
        choices = getattr(response, "choices", None)
        if not choices:
            raise ProviderResponseError(
                f"{self.spec}: the response holds no choices "
                f"(got {type(response).__name__}: {str(response)[:200]!r})", self.name)
        message = choices[0].message
        text = getattr(message, "content", None) or getattr(message, "refusal", None) or ""
        usage = getattr(response, "usage", None)
        tokens = Usage(int(getattr(usage, "prompt_tokens", 0) or 0),
                       int(getattr(usage, "completion_tokens", 0) or 0))
        return text, tokens, choices[0].finish_reason, getattr(response, "model", None)
