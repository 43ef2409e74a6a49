"""What the judge cache stores and how it is addressed: keys, entries, canonical JSON.

Every judge reply is stored under :func:`cache_key`, the SHA-256 of a canonical JSON document of
everything that can change the reply: the model, the messages, every sampling parameter, the
response format and the sample index. A reply's *request id* (:func:`keys_and_request_id`,
stored beside it) is the key of the same request with no response format: the same whatever
wire format produced the reply, so that a replay finds a reply with one lookup however it was
asked for. An :class:`Entry` is one stored reply. API keys are never stored: they are not part
of the key (a ``params`` field that looks like one is refused), and :func:`scrub_credentials`
drops fields that look like credentials from what is written.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rageval.core.errors import UsageError
from rageval.core.outputs.surrogates import (
    escaped_lone_surrogates,
    repaired,
    without_lone_surrogates,
)
from rageval.judge.llm.cache.prefixes import hashed_messages

__all__ = ["CACHE_KEY_VERSION", "Entry", "KeyParts", "cache_key", "cache_keys",
           "canonical_json", "encode_format", "encoded_cache_keys", "is_cache_key", "key_parts",
           "keys_and_request_id", "keys_and_request_id_of", "keys_of", "new_entry",
           "request_key_parts", "scrub_credentials", "storable"]

#: Part of every key: bump it when the canonical form changes, so old entries are never misread.
CACHE_KEY_VERSION = "rageval-judge-cache/1"

_SECRET_FIELD = re.compile(r"api[_-]?key|authorization|secret|password|token$", re.IGNORECASE)
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_USAGE_FIELDS = ("prompt_tokens", "completion_tokens", "total_tokens")


def is_cache_key(value: object) -> bool:
    """Whether ``value`` is a cache key: a 64-digit lowercase hex SHA-256."""
    return isinstance(value, str) and bool(_KEY_RE.match(value))


# One encoder for every call: json.dumps with these options would build a new one each time,
# and the judge encodes a dozen documents per request.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
# Values that hold no field names (checked by exact type: far cheaper than an ABC check).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8 kept, NaN refused."""
    return _CANONICAL.encode(obj)


_VERSION_JSON = canonical_json(CACHE_KEY_VERSION)


@functools.lru_cache(maxsize=4096)
def _is_secret_field(name: str) -> bool:
    # The same few field names come back in every request: match each once.
    return bool(_SECRET_FIELD.search(name)) and name not in _USAGE_FIELDS


def _secret(key: object) -> bool:
    return isinstance(key, str) and _is_secret_field(key)


def _check_no_secret(obj: Any, where: str) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if _secret(k):
                raise UsageError(f"{where} must not contain credentials (field '{k}')")
            _check_no_secret(v, where)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _check_no_secret(v, where)


def scrub_credentials(obj: Any) -> Any:
    """Drop credential-looking fields (api_key, authorization, ...) at any depth."""
    # Exact types first: every reply stored goes through here (its request, its log-probs),
    # and the abstract-class checks cost more than the copy.
    kind = type(obj)
    if kind in _SCALARS:
        return obj
    if kind is dict or isinstance(obj, Mapping):
        return {k: scrub_credentials(v) for k, v in obj.items()
                if not (isinstance(k, str) and _is_secret_field(k))}
    if kind is list or kind is tuple or isinstance(obj, list | tuple):
        return [scrub_credentials(v) for v in obj]
    return obj


def cache_key(
    model: str,
    messages: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None = None,
    response_format: Mapping[str, Any] | None = None,
    sample_index: int = 0,
) -> str:
    """The cache key of one judge request: hex SHA-256 of a canonical JSON of its inputs.

    ``params`` holds every sampling parameter sent (temperature, seed, top_p, max_tokens, ...);
    parameters whose value is ``None`` are not sent and so are left out of the key. Credentials
    are not part of a request's content: a ``params`` field that looks like one is refused.
    """
    return next(iter(cache_keys(model, messages, params, {"": response_format},
                                sample_index).values()))


def cache_keys(
    model: str,
    messages: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None,
    response_formats: Mapping[str, Mapping[str, Any] | None],
    sample_index: int = 0,
) -> dict[str, str]:
    """The keys of one request sent under each of several response formats (name -> key),
    each equal to :func:`cache_key` of that format; the shared part is encoded and hashed once.
    """
    try:
        encoded = {name: encode_format(fmt) for name, fmt in response_formats.items()}
    except (TypeError, ValueError) as exc:
        raise UsageError(f"cache_key: request is not JSON-serialisable: {exc}") from None
    return encoded_cache_keys(model, messages, params, encoded, sample_index)


def encode_format(response_format: Mapping[str, Any] | None) -> str:
    """A response format as it enters a cache key (its canonical JSON; ``null`` for none)."""
    return canonical_json(dict(response_format) if response_format is not None else None)


def encoded_cache_keys(
    model: str,
    messages: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None,
    encoded_formats: Mapping[str, str],
    sample_index: int = 0,
) -> dict[str, str]:
    """:func:`cache_keys`, the response formats given already encoded by
    :func:`encode_format` (a run sends the same few formats with every request: encoding them
    once saves half the work of a key)."""
    return keys_of(messages, key_parts(model, params, encoded_formats, sample_index))


@dataclass(frozen=True)
class KeyParts:
    """What the canonical documents of the requests of one model, set of parameters, sample
    index and response formats share besides their messages, encoded once (a run's requests
    differ in their messages alone): ``after``, the document from the end of the messages to
    the response format's value; ``tails``, each format's name and the rest of its document,
    as UTF-8."""

    after: str
    tails: tuple[tuple[str, bytes], ...]


def key_parts(model: str, params: Mapping[str, Any] | None, encoded_formats: Mapping[str, str],
              sample_index: int = 0) -> KeyParts:
    """The :class:`KeyParts` of :func:`encoded_cache_keys`'s requests (checked as it checks
    them: a model, a sample index, no credentials, JSON-serialisable parameters)."""
    if not isinstance(model, str) or not model:
        raise UsageError("cache_key: model must be a non-empty string")
    if isinstance(sample_index, bool) or not isinstance(sample_index, int) or sample_index < 0:
        raise UsageError("cache_key: sample_index must be a non-negative integer")
    params = {k: v for k, v in (params or {}).items() if v is not None}
    _check_no_secret(params, "cache_key params")
    try:
        # The canonical document's keys in sorted order: messages, model, params,
        # response_format, sample_index, v.
        after = (f',"model":{canonical_json(model)},"params":{canonical_json(params)},'
                 '"response_format":')
        after.encode("utf-8")  # a lone surrogate fails here
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise UsageError(f"cache_key: request is not JSON-serialisable: {exc}") from None
    tail = f',"sample_index":{sample_index},"v":{_VERSION_JSON}}}'
    return KeyParts(after, tuple((name, (fmt + tail).encode("utf-8"))
                                 for name, fmt in encoded_formats.items()))


def keys_of(messages: Iterable[Mapping[str, Any]], parts: KeyParts) -> dict[str, str]:
    """The keys (format name -> key) of the request of ``messages`` and ``parts``: the
    document up to the response format is hashed once (its start shared with the requests
    before it once for them all: :mod:`~rageval.judge.llm.cache.prefixes`), each format's
    end on a copy."""
    try:
        shared = hashed_messages(messages, canonical_json)
        shared.update(parts.after.encode("utf-8"))
    except (TypeError, ValueError) as exc:  # a lone surrogate: UnicodeEncodeError, a ValueError
        raise UsageError(f"cache_key: request is not JSON-serialisable: {exc}") from None
    keys = {}
    for name, tail in parts.tails:
        digest = shared.copy()
        digest.update(tail)
        keys[name] = digest.hexdigest()
    return keys


def keys_and_request_id(
    model: str,
    messages: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any] | None,
    encoded_formats: Mapping[str, str],
    sample_index: int = 0,
) -> tuple[dict[str, str], str]:
    """:func:`encoded_cache_keys` and the request's id (its key with no response format),
    hashed together."""
    return keys_and_request_id_of(messages, request_key_parts(model, params, encoded_formats,
                                                              sample_index))


def request_key_parts(model: str, params: Mapping[str, Any] | None,
                      encoded_formats: Mapping[str, str], sample_index: int = 0) -> KeyParts:
    """:func:`key_parts` with the request id's part (no response format) last: what
    :func:`keys_and_request_id_of` reads."""
    return key_parts(model, params, {**encoded_formats, "": _NO_FORMAT}, sample_index)


def keys_and_request_id_of(messages: Iterable[Mapping[str, Any]],
                           parts: KeyParts) -> tuple[dict[str, str], str]:
    """:func:`keys_and_request_id` of ``messages``, the rest of the request given as the
    :func:`request_key_parts` of its model, parameters, formats and sample index (the same
    for every request of a run's rubric: made once)."""
    keys = keys_of(messages, parts)
    return keys, keys.pop("")


_NO_FORMAT = encode_format(None)


@dataclass(frozen=True)
class Entry:
    """One stored reply; ``request_id``: its request's id (see the module), None for a reply
    stored without one (by an earlier version, or imported from its export)."""

    key: str
    model: str | None
    request: dict[str, Any]
    reply_text: str
    usage: dict[str, int]
    meta: dict[str, Any] = field(default_factory=dict)
    created: float = 0.0
    request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object written by :meth:`JudgeCache.export_jsonl` (``request_id`` only
        when the entry has one: an earlier version's import skips it)."""
        out = {
            "key": self.key,
            "model": self.model,
            "request": self.request,
            "reply": self.reply_text,
            "usage": self.usage,
            "meta": self.meta,
            "created": self.created,
        }
        if self.request_id is not None:
            out["request_id"] = self.request_id
        return out


def _clean_usage(usage: Mapping[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in (usage or {}).items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise UsageError(f"usage field '{k}' must be a non-negative integer, got {v!r}")
        out[str(k)] = v
    return out


def new_entry(key: str, request_summary: Mapping[str, Any], reply_text: str,
              usage: Mapping[str, Any] | None = None,
              meta: Mapping[str, Any] | None = None, request_id: str | None = None) -> Entry:
    """The entry :meth:`JudgeCache.put` stores for one reply: validated, credentials dropped,
    stamped with the time."""
    if not is_cache_key(key):
        raise UsageError(f"cache key must be a 64-digit lowercase hex SHA-256, got {key!r}")
    if request_id is not None and not is_cache_key(request_id):
        raise UsageError("request id must be a 64-digit lowercase hex SHA-256, got "
                         f"{request_id!r}")
    if not isinstance(reply_text, str):
        raise UsageError("reply_text must be a string (errors are never cached)")
    return storable(Entry(
        key=key,
        model=request_summary.get("model") if isinstance(request_summary, Mapping) else None,
        request=scrub_credentials(dict(request_summary)),
        reply_text=reply_text,
        usage=_clean_usage(usage),
        meta=scrub_credentials(dict(meta or {})),
        created=time.time(),
        request_id=request_id,
    ))


def storable(entry: Entry) -> Entry:
    """``entry`` as UTF-8 can hold it: a lone surrogate (which a server may send) kept in the
    reply as its JSON escape, so that the reply parses as it did when it arrived; replaced
    with U+FFFD in the request summary and meta (:mod:`rageval.core.outputs.surrogates`)."""
    reply = escaped_lone_surrogates(entry.reply_text)
    model = None if entry.model is None else without_lone_surrogates(entry.model)
    changed: list[str] = []
    request = repaired(entry.request, "request", changed)
    meta = repaired(entry.meta, "meta", changed)
    if reply is entry.reply_text and model == entry.model and not changed:
        return entry
    return dataclasses.replace(entry, reply_text=reply, model=model, request=request, meta=meta)
