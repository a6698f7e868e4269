"""The llm layer: the only way agents talk to models.

    from kernelwright.llm import make_provider, CompletionRequest, Message
    provider = make_provider("openai:gpt-5")          # or anthropic:..., replay:..., exchange:...
    completion = await provider.complete(CompletionRequest([Message("user", "hi")]))

Importing this package never imports the openai / anthropic SDKs (GPU workers may lack them);
the provider modules import them on first use. docs/providers.md lists every provider.
"""
from .config import LLMConfig
from .errors import (EXIT_ANSWER_PENDING, AnswerPending, BudgetExceeded, CassetteMiss,
                     ConfigError, LLMError, ProviderAuthError, ProviderError,
                     ProviderRequestError, ProviderResponseError, ProviderUnavailable)
from .exchange import ExchangeProvider, PendingPrompt, list_pending
from .parse import ParseResult, extract_code, extract_json
from .provider import Provider
from .registry import make_provider
from .replay import RecordingProvider, ReplayProvider
from .router import CallRecord, Router
from .spec import ProviderSpec, parse_spec
from .types import Completion, CompletionRequest, Message, Usage

__all__ = [
    "EXIT_ANSWER_PENDING", "AnswerPending", "BudgetExceeded", "CassetteMiss", "Completion",
    "CompletionRequest", "ConfigError", "ExchangeProvider", "LLMConfig", "LLMError", "Message",
    "ParseResult", "PendingPrompt", "Provider", "ProviderAuthError", "ProviderError",
    "ProviderRequestError", "ProviderResponseError", "ProviderSpec", "ProviderUnavailable",
    "RecordingProvider", "ReplayProvider", "Router", "CallRecord", "Usage", "extract_code", "extract_json",
    "list_pending", "make_provider", "parse_spec",
]
