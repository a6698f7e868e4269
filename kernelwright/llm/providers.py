"""Every LLM provider kernelwright knows, in one table (`PROVIDERS`): its spec prefix, what follows
the prefix, where its key comes from, a local server's default URL, and the class that answers.

Everything else is derived from the table: parsing spec strings and the accepted forms their errors
list (`spec.py`), the key variables the config reads and refuses in files (`config.py`), which key
an endpoint is sent (`keys.py`), building a provider (`registry.py`), `--llm`'s help and
docs/providers.md's table of specs (`docs_table`; a test keeps the page in step). Adding a provider
takes its module, one entry here and the re-rendered table (docs/architecture.md, "How to extend").

The class is named as "module:Class" and imported when a spec asks for it, as packaging's entry
points are: the provider modules import the config and the spec types, which read this table, so
the table cannot import them. `tests/llm/test_providers.py` imports every entry's class.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

DOCS_BEGIN = "<!-- providers:begin (rendered by `python -m kernelwright.llm --docs docs/providers.md`; do not edit) -->"
DOCS_END = "<!-- providers:end -->"
MODEL, PATH, WRAPPER = "model", "path", "wrapper"  # what follows `name:` (a wrapper: a cassette and a spec)


@dataclass(frozen=True)
class Vendor:
    """A hosted API's key: read from `env_name`, sent only to `host`. Other base URLs get the key
    named under [llm.endpoints], else `placeholder` (None: such an endpoint is an error)."""

    host: str  # "api.openai.com"
    env_name: str  # "OPENAI_API_KEY"
    placeholder: str | None


@dataclass(frozen=True)
class ProviderKind:
    """One provider: `name` is the spec prefix; `forms` the accepted spec forms, each with what
    answers it (help, errors and docs show them)."""

    name: str
    takes: str  # MODEL, PATH or WRAPPER
    forms: tuple[tuple[str, str], ...]  # (form, what answers)
    builds: str = ""  # "module:Class" of the provider ("" for a local server: its family's class)
    vendor: Vendor | None = None  # where the key comes from (a hosted API)
    family: str | None = None  # a local server: the kind its specs become ("vllm:m" is "openai:m@URL")
    local_url: str | None = None  # a local server's default URL
    wraps: str = ""  # a wrapper: "required" or "optional" inner spec after "="

    def provider_class(self) -> type:
        """The `Provider` class that answers (imported now; see the module docstring)."""
        module, _, name = (self.builds or kind(self.family or "").builds).partition(":")
        return getattr(importlib.import_module(module), name)


PROVIDERS: tuple[ProviderKind, ...] = (
    ProviderKind("openai", MODEL, (("openai:MODEL", "OpenAI"),
                                   ("openai:MODEL@BASE_URL", "any OpenAI-compatible server: vLLM, SGLang, Ollama, "
                                                             "OpenRouter, DeepSeek, ...")),
                 builds="kernelwright.llm.openai_provider:OpenAIProvider",
                 vendor=Vendor("api.openai.com", "OPENAI_API_KEY", placeholder="EMPTY")),
    ProviderKind("anthropic", MODEL, (("anthropic:MODEL", "Anthropic"),),
                 builds="kernelwright.llm.anthropic_provider:AnthropicProvider",
                 vendor=Vendor("api.anthropic.com", "ANTHROPIC_API_KEY", placeholder=None)),
    ProviderKind("vllm", MODEL, (("vllm:MODEL", "a local vLLM server"),), family="openai",
                 local_url="http://localhost:8000/v1"),
    ProviderKind("sglang", MODEL, (("sglang:MODEL", "a local SGLang server"),), family="openai",
                 local_url="http://localhost:30000/v1"),
    ProviderKind("ollama", MODEL, (("ollama:MODEL", "a local Ollama server"),), family="openai",
                 local_url="http://localhost:11434/v1"),
    ProviderKind("replay", WRAPPER, (("replay:CASSETTE.jsonl", "answers from the cassette only; a request not on "
                                                               "tape is an error (strict)"),
                                     ("replay:CASSETTE.jsonl=SPEC", "answers from the cassette; a miss is asked of "
                                                                    "`SPEC` and recorded")),
                 builds="kernelwright.llm.replay:ReplayProvider", wraps="optional"),
    ProviderKind("record", WRAPPER, (("record:CASSETTE.jsonl=SPEC", "asks `SPEC` and appends every answer to the "
                                                                    "cassette"),),
                 builds="kernelwright.llm.replay:RecordingProvider", wraps="required"),
    ProviderKind("exchange", PATH, (("exchange:DIR", "a person or an outside agent answers prompt files in `DIR`"),),
                 builds="kernelwright.llm.exchange:ExchangeProvider"),
)


def names() -> list[str]:
    return [p.name for p in PROVIDERS]


def kind(name: str) -> ProviderKind | None:
    """The entry for a spec prefix (lower case), or None."""
    return next((p for p in PROVIDERS if p.name == name), None)


def vendors() -> list[Vendor]:
    """Every hosted API's key (the variables the config reads)."""
    return [p.vendor for p in PROVIDERS if p.vendor is not None]


def spec_forms() -> list[str]:
    return [form for p in PROVIDERS for form, _ in p.forms]


def docs_table() -> str:
    """docs/providers.md's table of spec forms: what answers each, its key, a local server's URL."""
    rows = ["| spec | what answers |", "|---|---|"]
    for p in PROVIDERS:
        for form, what in p.forms:
            if p.vendor and "@" not in form:
                what += f" (key: `{p.vendor.env_name}`)"
            if p.local_url:
                what += f": shorthand for `{p.family}:MODEL@{p.local_url}`; `@URL` still overrides"
            rows.append(f"| `{form}` | {what} |")
    return "\n".join(rows) + "\n"


def replace_docs_table(document: str) -> str:
    """`document` with the text between the providers markers replaced by `docs_table()`."""
    start, end = document.find(DOCS_BEGIN), document.find(DOCS_END)
    if start < 0 or end < start:
        raise ValueError(f"the document has no {DOCS_BEGIN!r} ... {DOCS_END!r} section")
    return document[:start] + DOCS_BEGIN + "\n" + docs_table() + document[end:]
