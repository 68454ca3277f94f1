"""Token counting for compaction: tiktoken for OpenAI models, a measured estimate otherwise.

OpenAI models are counted with tiktoken's encoding for the model (``o200k_base`` for the
GPT-4o/4.1/5 and o-series families, ``cl100k_base`` for GPT-4/3.5), plus the chat format's
per-message overhead (3 tokens a message, 3 to prime the reply: OpenAI's published rule).
tiktoken downloads its BPE files on first use; offline, ``make tokenizers`` (``python -m
charter.agent.tokens install RANKS_DIR``) writes them into the cache from the
``js-tiktoken`` npm package, whose ranks rebuild the exact files (tiktoken checks their
SHA-256 again when it loads them).

Other providers (Anthropic, Gemini, mock) use a lexical estimate (:class:`EstimateCounter`)
plus the same per-message overhead; ``benchmarks/token_estimate.py`` measures its error
against tiktoken on prose, code and tool output. (Claude's tokenizer is not public: the
error against it is not measured here.) Counts are cached per message object, so counting
a growing conversation costs only the new messages.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

#: tiktoken's own download URLs and SHA-256 of the files (tiktoken_ext.openai_public).
ENCODINGS: dict[str, tuple[str, str]] = {
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}
MESSAGE_OVERHEAD = 3
REPLY_PRIMING = 3

#: Context windows (input tokens) of well-known model families, longest prefix wins.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "claude": 200_000,
    "gemini-1.5": 1_048_576,
    "gemini-2": 1_048_576,
}


def context_window(model: str | None) -> int | None:
    """The model's context window when charter knows it (``None`` otherwise)."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    return None if best is None else CONTEXT_WINDOWS[best]


def tiktoken_cache_dir() -> Path:
    env = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "charter" / "tiktoken"


def _cache_file(name: str, cache: Path) -> Path:
    url = ENCODINGS[name][0]
    return cache / hashlib.sha1(url.encode()).hexdigest()


class Counter(Protocol):
    method: str

    def text(self, text: str) -> int: ...


_LEXEMES = re.compile(r"[^\W\d_]+|\d{1,3}|[^\w\s]|_")


class EstimateCounter:
    """The documented estimate for providers without a local tokenizer.

    Words count one token plus one per 9 letters, every 1-3 digit group and punctuation
    mark 0.75. Against tiktoken it is within 4-5% on average for prose and code and 1-2%
    for JSON tool output (``benchmarks/token_estimate.py``); ``bytes / 4`` was 26% low on
    JSON, the direction that makes compaction late.
    """

    method = "estimate:lexical"

    def text(self, text: str) -> int:
        words = symbols = 0
        for match in _LEXEMES.finditer(text):
            lexeme = match.group()
            if lexeme[0].isalpha():
                words += 1 + len(lexeme) // 9
            else:
                symbols += 1
        return words + (symbols * 3 + 3) // 4


class TiktokenCounter:
    """An exact tiktoken encoding."""

    def __init__(self, encoding: Any, name: str) -> None:
        self._encoding = encoding
        self.method = f"tiktoken:{name}"

    def text(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


_ENCODINGS_LOADED: dict[str, Any] = {}


def _encoding(name: str) -> Any | None:
    """The tiktoken encoding, from tiktoken's cache or charter's; ``None`` when unavailable."""
    if name in _ENCODINGS_LOADED:
        return _ENCODINGS_LOADED[name]
    try:
        import tiktoken
    except ImportError:
        _ENCODINGS_LOADED[name] = None
        return None
    cache = tiktoken_cache_dir()
    previous = os.environ.get("TIKTOKEN_CACHE_DIR")
    found = None
    try:
        if _cache_file(name, cache).exists():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
        found = tiktoken.get_encoding(name)
    except Exception:  # offline and not installed: fall back to the estimate
        found = None
    finally:
        if previous is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = previous
    _ENCODINGS_LOADED[name] = found
    return found


def tiktoken_ready() -> bool:
    """Both encodings load without the network."""
    return all(_encoding(name) is not None for name in ENCODINGS)


def encoding_name(model: str | None) -> str:
    name = (model or "").lower().rsplit("/", 1)[-1]
    if name.startswith(("gpt-4-", "gpt-4.0", "gpt-3.5")) or name == "gpt-4":
        return "cl100k_base"
    return "o200k_base"


def counter_for(provider: str | None, model: str | None) -> Counter:
    """tiktoken for OpenAI models (when its files are available), else the estimate."""
    if (provider or "").lower() in ("openai", "azure", "openai-compatible") or (
        model or ""
    ).lower().startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        name = encoding_name(model)
        encoding = _encoding(name)
        if encoding is not None:
            return TiktokenCounter(encoding, name)
    return EstimateCounter()


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"], default=str)
    if message.get("name"):
        text += str(message["name"])
    return text


class MessageCounter:
    """Counts a conversation, caching each message's count (new messages only per turn)."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self._cache: dict[int, tuple[Mapping[str, Any], int]] = {}

    def message(self, message: Mapping[str, Any]) -> int:
        hit = self._cache.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        n = self.counter.text(_message_text(message)) + MESSAGE_OVERHEAD
        self._cache[id(message)] = (message, n)
        return n

    def total(self, messages: Iterable[Mapping[str, Any]], system: str | None = None) -> int:
        n = REPLY_PRIMING + sum(self.message(m) for m in messages)
        if system:
            n += self.counter.text(system) + MESSAGE_OVERHEAD
        return n

    def forget_except(self, messages: Iterable[Mapping[str, Any]]) -> None:
        keep = {id(m) for m in messages}
        self._cache = {k: v for k, v in self._cache.items() if k in keep}


def install_from_js_tiktoken(
    ranks_dir: str | os.PathLike[str], cache: Path | None = None
) -> list[Path]:
    """Rebuild tiktoken's BPE files from ``js-tiktoken``'s ``dist/ranks`` and cache them.

    js-tiktoken stores each encoding as lines of ``<prefix> <first rank> <base64 token>...``;
    tiktoken's file is ``<base64 token> <rank>`` per line. The result must match tiktoken's
    published SHA-256 or nothing is written.
    """
    cache = cache or tiktoken_cache_dir()
    written = []
    for name, (_url, digest) in ENCODINGS.items():
        source = Path(ranks_dir) / f"{name}.js"
        text = source.read_text(encoding="utf-8")
        data = json.loads(text[text.index("{") : text.rindex("}") + 1])
        ranked: list[tuple[int, str]] = []
        for line in data["bpe_ranks"].split("\n"):
            parts = line.split(" ")
            first = int(parts[1])
            ranked.extend((first + i, token) for i, token in enumerate(parts[2:]))
        ranked.sort()
        blob = "".join(f"{token} {rank}\n" for rank, token in ranked).encode()
        actual = hashlib.sha256(blob).hexdigest()
        if actual != digest:
            raise ValueError(f"{source}: rebuilt {name} has sha256 {actual}, expected {digest}")
        cache.mkdir(parents=True, exist_ok=True)
        target = _cache_file(name, cache)
        target.write_bytes(blob)
        written.append(target)
    _ENCODINGS_LOADED.clear()
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m charter.agent.tokens install RANKS_DIR`` (used by ``make tokenizers``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "install":
        print(
            "usage: python -m charter.agent.tokens install JS_TIKTOKEN_RANKS_DIR", file=sys.stderr
        )
        return 2
    try:
        for path in install_from_js_tiktoken(args[1]):
            print(path)
    except (OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
