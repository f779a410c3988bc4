"""Token estimates with tiktoken ``o200k_base``, loaded offline from the encodings litellm ships.

litellm bundles tiktoken's cache files in ``litellm_core_utils/tokenizers``; pointing
``TIKTOKEN_CACHE_DIR`` there lets tiktoken load without the network and without importing litellm
(a ~3 s import). When the file is missing or corrupt we fall back to a character estimate rather
than let tiktoken download it. The parsed table is kept in the per-user data folder
(``cache/o200k_base-tiktoken-<version>.marshal``, checked by its SHA-256), so a later process builds
the encoding from it without parsing the file again (issue 9: the first request's path).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENCODING_NAME = "o200k_base"
_O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
# Per-message framing (role, separators) the chat format adds on top of the content.
MESSAGE_OVERHEAD_TOKENS = 4

_lock = threading.Lock()
_loaded = False
_encoding: Any = None  # tiktoken.Encoding, or None when only the fallback is available


def litellm_tokenizers_dir() -> Path | None:
    """litellm's bundled tokenizer folder, found without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


def _cache_file_ok(folder: Path) -> bool:
    """True when tiktoken will find a valid o200k cache file there (so it never downloads)."""
    path = folder / hashlib.sha1(_O200K_URL.encode()).hexdigest()
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return hashlib.sha256(data).hexdigest() == _O200K_SHA256


def _ranks_cache_path() -> Path:
    """Where the parsed encoding is kept: the per-user data folder (never a workspace, never ``/user``)."""
    import tiktoken

    from workbench.config.user import user_data_dir

    version = getattr(tiktoken, "__version__", "unknown")
    return user_data_dir() / "cache" / f"{ENCODING_NAME}-tiktoken-{version}.marshal"


def _from_ranks_cache() -> Any:
    """The encoding built from its parsed form (``_save_ranks_cache``), or None (none yet, or unusable).

    Issue 9, cold start: tiktoken parses its 3.6 MB rank file line by line (200,000 base64 decodes,
    0.15-0.3 s, competing for the interpreter with litellm's import on the first request's path);
    unmarshalling the parsed table takes ~0.04 s. The file ends with the SHA-256 of what precedes it,
    checked before ``marshal`` reads a byte of it."""
    import marshal

    import tiktoken

    try:
        data = _ranks_cache_path().read_bytes()
    except OSError:
        return None
    payload, digest = data[:-32], data[-32:]
    if len(data) <= 32 or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        args = marshal.loads(payload)
        if not isinstance(args, dict) or args.get("source_sha256") != _O200K_SHA256:
            return None
        return tiktoken.Encoding(name=ENCODING_NAME, pat_str=args["pat_str"], mergeable_ranks=args["mergeable_ranks"],
                                 special_tokens=args["special_tokens"])
    except Exception:  # noqa: BLE001 - any other shape: parse the rank file again
        return None


def _save_ranks_cache(args: dict[str, Any]) -> None:
    """Keep the parsed encoding for the next process (best effort: an unwritable folder only costs time)."""
    import marshal
    import tempfile

    try:
        path = _ranks_cache_path()
        payload = marshal.dumps({"source_sha256": _O200K_SHA256, "pat_str": args["pat_str"],
                                 "mergeable_ranks": args["mergeable_ranks"], "special_tokens": args["special_tokens"]})
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload + hashlib.sha256(payload).digest())
            os.replace(tmp, path)  # whole or not at all, whoever writes it at the same time
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except Exception as exc:  # noqa: BLE001 - best effort: the encoding is already built
        log.debug("token estimates: the parsed encoding was not kept (%s)", exc)


def _parsed_and_kept() -> Any:
    """tiktoken's own parse of the rank file (its cache folder set to litellm's), kept for next time."""
    import tiktoken
    import tiktoken.registry
    from tiktoken_ext import openai_public

    registered = getattr(tiktoken.registry, "ENCODINGS", {}).get(ENCODING_NAME)
    if registered is not None:  # litellm loaded it first (its own token count): not parsed twice
        return registered
    args = openai_public.o200k_base()
    encoding = tiktoken.Encoding(**args)
    _save_ranks_cache(args)
    return encoding


def _register(encoding: Any) -> Any:
    """Make ``encoding`` the one ``tiktoken.get_encoding`` gives (litellm counts tokens with it): parsed
    once a process, as before. The registry is tiktoken's; without one, litellm loads its own."""
    import tiktoken.registry as registry

    encodings = getattr(registry, "ENCODINGS", None)
    if isinstance(encodings, dict):
        with getattr(registry, "_lock", contextlib.nullcontext()):
            encoding = encodings.setdefault(ENCODING_NAME, encoding)
    return encoding


def _load() -> Any:
    """Load the encoding once (thread-safe); None means "use the fallback"."""
    global _loaded, _encoding
    if _loaded:
        return _encoding
    with _lock:
        if _loaded:
            return _encoding
        encoding = None
        try:
            encoding = _from_ranks_cache()
        except Exception:  # noqa: BLE001 - no tiktoken, no data folder: the paths below say what is wrong
            encoding = None
        folder = litellm_tokenizers_dir()
        if encoding is not None:
            if folder is not None:  # as below: litellm's tokenizers, never a download
                os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
            encoding = _register(encoding)
        elif folder is None or not _cache_file_ok(folder):
            log.warning(
                "token estimates: the offline %s encoding was not found in litellm's tokenizers folder; "
                "using a rough 4-characters-per-token estimate",
                ENCODING_NAME,
            )
        else:
            # Forced (not setdefault): litellm sets the same folder on import; any other cache dir
            # could lack the file and make tiktoken download it.
            os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
            try:
                encoding = _register(_parsed_and_kept())
            except Exception as exc:  # noqa: BLE001 - any failure falls back to the estimate
                log.warning("token estimates: could not load %s (%s); using a rough estimate", ENCODING_NAME, exc)
                encoding = None
        _encoding = encoding
        _loaded = True
        return encoding


def _fallback(text: str) -> int:
    return len(text) // 4 + 1 if text else 0


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text`` (exact o200k count when the encoding is available)."""
    if not text:
        return 0
    enc = _load()
    if enc is None:
        return _fallback(text)
    return len(enc.encode(text, disallowed_special=()))


def _message_parts(message: Any) -> Iterable[str]:
    """The text of a Message or an OpenAI-style dict that counts toward the prompt."""
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, list):  # multi-part content
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield part["text"]
        elif content:
            yield str(content)
        for call in message.get("tool_calls") or ():
            fn = call.get("function", call) if isinstance(call, dict) else {}
            yield str(fn.get("name") or "")
            args = fn.get("arguments") or fn.get("raw_arguments") or ""
            yield args if isinstance(args, str) else str(args)
        return
    yield getattr(message, "content", "") or ""
    for call in getattr(message, "tool_calls", ()) or ():
        yield call.name
        yield call.raw_arguments or ""


def estimate_messages_tokens(system: str, messages: Iterable[Any]) -> int:
    """Estimated prompt tokens: the system prompt plus every message's content and tool calls."""
    total = estimate_tokens(system) + (MESSAGE_OVERHEAD_TOKENS if system else 0)
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS + sum(estimate_tokens(p) for p in _message_parts(message) if p)
    return total


def truncate_to_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_tokens`` tokens at a token boundary; returns (text, was_cut)."""
    if max_tokens <= 0:
        return ("", bool(text))
    if not text:
        return (text, False)
    enc = _load()
    if enc is None:
        limit = max(0, (max_tokens - 1) * 4)
        if _fallback(text) <= max_tokens:
            return (text, False)
        return (text[:limit], True)
    tokens = enc.encode(text, disallowed_special=())
    if len(tokens) <= max_tokens:
        return (text, False)
    cut = enc.decode(tokens[:max_tokens])
    # A cut inside a multi-byte character decodes to U+FFFD at the end: drop it.
    cut = cut.rstrip("\ufffd")
    return (cut, True)
