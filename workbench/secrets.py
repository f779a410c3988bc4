"""Where API keys come from: the environment, else the OS keyring, else a per-user 0600 file.

Keys are never written to the workspace, the thread store or a log (G4).
"""

from __future__ import annotations

import os

# litellm provider prefix -> the environment variable litellm itself reads.
ENV_VARS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
}


def provider_of(model: str) -> str:
    """The provider part of a litellm model string (``openai/gpt-4.1`` -> ``openai``)."""
    if "/" in model:
        return model.split("/", 1)[0]
    if model.startswith(("claude",)):
        return "anthropic"
    if model.startswith(("gemini",)):
        return "gemini"
    return "openai"


def env_var_for(model: str) -> str:
    return ENV_VARS.get(provider_of(model), provider_of(model).upper() + "_API_KEY")


def lookup_api_key(model: str) -> str | None:
    """The key for a model's provider, or None (litellm then reads its own environment variables)."""
    from workbench.redact import remember  # every key handed out is scrubbed from errors (R10)

    value = os.environ.get(env_var_for(model))
    if value:
        remember(value)
        return value
    try:
        from workbench.keystore import load_key
    except ImportError:  # pragma: no cover - keystore is part of the package
        return None
    value = load_key(provider_of(model))
    remember(value)
    return value
