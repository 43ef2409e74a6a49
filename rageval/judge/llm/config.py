"""What a run's judge is: :class:`JudgeConfig`, frozen, the configuration that is signed and
keys the cache, each field carrying its option's declaration (its flag, help, check and
evaluation-file key: :mod:`rageval.core.options`).

The ``--judge-*`` flags, the ``[judge]`` table of an evaluation file and their defaults are
built from these declarations (:data:`JUDGE_OPTIONS`); :meth:`JudgeConfig.check` validates
every field before anything is read, written or sent, so a bad option never leaves a cache
file or an output directory behind. What a run does with it (its caps, its shared cache, the
formats its endpoints accept) is the run's :class:`~rageval.judge.llm.session.JudgeSession`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any

from rageval.core import read_only
from rageval.core.errors import MOST_SAMPLES, UsageError, check_int
from rageval.core.files import creatable
from rageval.core.options import Option, Signed, declare, options_of
from rageval.core.signature import Field
from rageval.judge.llm.key_env import DEFAULT_API_KEY_ENV
from rageval.judge.llm.members import PANEL_RULES, check_panel, panel_members, parse_member
from rageval.judge.llm.transport.endpoint import Endpoint
from rageval.judge.llm.transport.formats import LADDERS, MODES

__all__ = ["DEFAULT_CACHE", "JUDGE_OPTIONS", "REASONING_EFFORTS", "TOP_LOGPROBS", "JudgeConfig",
           "check_extra", "parse_extra"]

DEFAULT_CACHE = os.path.join(".rageval", "cache.sqlite")
TOP_LOGPROBS = 20  # the most the OpenAI API returns per token
#: The longest wait for a run's first reply unless told otherwise (or twice the per-attempt
#: timeout, when that is longer: a slow endpoint gets two full attempts).
DEFAULT_FIRST_REPLY_S = 300.0


def first_reply_limit(first_reply_s: float | None, timeout_s: float) -> float:
    """The first-reply deadline in seconds: ``first_reply_s`` when given, else the default."""
    if first_reply_s is not None:
        return first_reply_s
    return max(DEFAULT_FIRST_REPLY_S, 2 * timeout_s)


def _int(name: str, low: int, high: int | None = None) -> Callable[[Any], None]:
    return lambda value: check_int(name, value, low, high=high)


def _seconds(flag: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number of seconds, got {value!r}")
    return check


def _price(flag: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not (value >= 0 and math.isfinite(value)):
            raise UsageError(f"{flag} must be a non-negative price, got {value}")
    return check


def _fraction(value: Any) -> None:
    if not (isinstance(value, int | float) and 0 <= value <= 1):
        raise UsageError(f"--judge-batch-discount must be a fraction from 0 to 1, got {value!r}")


def _rpm(value: Any) -> None:
    if value <= 0:
        raise UsageError(f"judge rpm must be positive, got {value}")


def _response_format(value: Any) -> None:
    if value not in MODES:
        raise UsageError(f"--judge-response-format must be one of {', '.join(MODES)}, "
                         f"got {value!r}")


#: The reasoning efforts ``--judge-reasoning-effort`` takes (OpenAI's ``reasoning_effort``).
REASONING_EFFORTS = ("low", "medium", "high")


def _reasoning_effort(value: Any) -> None:
    if value not in REASONING_EFFORTS:
        raise UsageError(f"--judge-reasoning-effort must be one of "
                         f"{', '.join(REASONING_EFFORTS)}, got {value!r}")


def _temperature(value: Any) -> None:
    if not 0 <= value <= 2:
        raise UsageError(f"judge temperature must be between 0 and 2, got {value}")


def _max_cost(value: Any) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise UsageError(f"--judge-max-cost must be a positive amount of USD, got {value!r}")


def _panel(specs: Any) -> tuple[Any, ...]:
    return tuple(parse_member(spec) for spec in (specs or ()))


def _extra_text(extra: Mapping[str, Any]) -> str:
    """Extra request fields as signatures show them (``key=json``, sorted)."""
    # "|" separates a signature's fields: escaped as JSON may (still the same value).
    return ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}".replace("|", "\\u007c")
                    for k, v in sorted(extra.items()))


def _opt(**kwargs: Any) -> Any:
    """A field declaring its option (``default``/``default_factory`` go to the field)."""
    spec = {k: kwargs.pop(k) for k in ("default", "default_factory", "hash") if k in kwargs}
    return field(**spec, metadata=declare(**kwargs))


@dataclass(frozen=True)
class JudgeConfig:
    """How the judge is reached, asked and cached (each field's declaration holds the help
    its ``--judge-*`` flag shows).

    ``model`` is part of every cache key and signature, so replaying offline needs it too.
    ``base_url``: an OpenAI-compatible endpoint (default OpenAI's); user info and query values
    in it are credentials and are never shown or stored. ``cache``: the SQLite file of replies
    (default ``.rageval/cache.sqlite``), or a JSONL export read for an offline replay.
    ``offline``: use the cache only, never the network; ``allow_missing``: with ``offline``,
    leave records the cache lacks unscored instead of failing. ``refresh``: ask again even when
    a reply is cached, and store the new one. ``api_key_env`` names the environment variable
    holding the key (the key itself is never stored). ``prompts_dir``: a directory of user
    rubrics looked up by name before the built-ins.

    ``response_format``: how structured output is asked for, one of
    :data:`~rageval.judge.llm.transport.formats.MODES` (``auto`` negotiates with the endpoint).
    ``timeout``: seconds per attempt; ``max_retries``: attempts after the first for a passing
    fault; ``first_reply_timeout``: seconds from the first request within which some reply
    must arrive, else the run stops (None: 300, or twice ``timeout`` when that is longer).
    ``max_tokens``: the longest reply asked for (a reasoning model's reasoning tokens
    included); ``reasoning_effort``: a reasoning model's, sent as it is; ``history_chars``:
    the most characters of earlier turns shown with a turn of a conversation (None: all of
    them). ``samples``:
    replies per item, their mean the value; ``seed``: sent with each request (sample ``i``
    gets ``seed + i``). ``logprobs``: score by the expected value of the score token's top
    log-probabilities (G-Eval). ``price_in``/``price_out``: USD per million prompt/completion
    tokens, ``price_cached_in`` per million prompt tokens the endpoint read from its prompt
    cache (None: ``price_in``). ``against``: the records file of the other system, for
    ``judge:pairwise``.
    ``extra``: request fields sent as they are (``{"repeat_penalty": 1.1}`` for llama.cpp),
    part of the cache key and the signature. ``any_served_model``: reuse cached replies even
    when the endpoint now serves another model under the name. ``max_requests``/``max_cost``:
    the run's caps on what it sends. ``panel``: what each member of a judge panel changes of
    this configuration (:mod:`rageval.judge.llm.members`), ``panel_rule`` how their values
    make the panel's, ``panel_min_members`` how many must answer. ``dry_run``: send nothing,
    count what would be sent. ``batch`` and the ``batch_*`` fields: batch judging
    (:mod:`rageval.judge.llm.batch`).
    """

    model: str | None = _opt(
        default=None, dest="judge_model", flags=("--judge-model",), metavar="MODEL",
        kind="str", signed=Signed("judge", "jm", text=lambda model: model or "?").always(),
        help="judge model name (required for judge metrics, offline too: it is part of the "
        "cache key)")
    base_url: str | None = _opt(
        default=None, dest="judge_base_url", flags=("--judge-base-url",), metavar="URL",
        kind="str",
        signed=Signed("endpoint", "ep", text=lambda url: Endpoint.of(url).public).always(),
        help="OpenAI-compatible endpoint (default: OpenAI's)")
    # The rest by keyword only (the two above may be given in order, as they always could).
    _: KW_ONLY
    api_key_env: str = _opt(
        default=DEFAULT_API_KEY_ENV, dest="judge_api_key_env", flags=("--judge-api-key-env",),
        metavar="VAR", kind="str",
        help=f"environment variable holding the API key (default {DEFAULT_API_KEY_ENV})")
    concurrency: int = _opt(
        default=16, dest="judge_concurrency", flags=("--judge-concurrency",), type=int,
        metavar="N", kind="int", check=_int("judge concurrency", 1),
        help="judge requests in flight at once (default 16)")
    rpm: float | None = _opt(
        default=None, dest="judge_rpm", flags=("--judge-rpm",), type=float, metavar="N",
        kind="float", check=_rpm, help="at most N judge requests started per minute")
    response_format: str = _opt(
        default="auto", dest="judge_response_format", flags=("--judge-response-format",),
        choices=MODES, kind="choice", check=_response_format,
        signed=Signed("response_format", "rf").always(),
        help="how structured output is asked for: auto (default) steps down json_schema -> "
        "json_object -> text as the endpoint refuses them, once per endpoint and model; the "
        "others insist on one")
    timeout: float = _opt(
        default=120.0, dest="judge_timeout", flags=("--judge-timeout",), type=float,
        metavar="SECONDS", kind="float", check=_seconds("--judge-timeout"),
        help="seconds to wait for one attempt of a judge request (default 120)")
    first_reply_timeout: float | None = _opt(
        default=None, dest="judge_first_reply_timeout", flags=("--judge-first-reply-timeout",),
        type=float, metavar="SECONDS", kind="float",
        check=_seconds("--judge-first-reply-timeout"),
        help="stop the run when the endpoint has not replied within this long of the first "
        "request (a server that accepts connections and never answers); default 300, or "
        "twice --judge-timeout when that is longer")
    max_tokens: int | None = _opt(
        default=None, dest="judge_max_tokens", flags=("--judge-max-tokens",), type=int,
        metavar="N", kind="int", check=_int("--judge-max-tokens", 1),
        signed=Signed("max_tokens", "mt", when=bool),
        help="the longest reply asked for (default: the endpoint's; set it for small local "
        "models, which can write until their context is full)")
    reasoning_effort: str | None = _opt(
        default=None, dest="judge_reasoning_effort", flags=("--judge-reasoning-effort",),
        choices=REASONING_EFFORTS, kind="choice", check=_reasoning_effort,
        signed=Signed("reasoning_effort", "re"),
        help="how hard a reasoning model thinks before it answers: low, medium or high, sent as "
        "reasoning_effort (default: the model's); part of the cache key and the signature; an "
        "endpoint that refuses it stops the run")
    history_chars: int | None = _opt(
        default=None, dest="judge_history_chars", flags=("--judge-history-chars",), type=int,
        metavar="N", kind="int", check=_int("--judge-history-chars", 0),
        signed=Signed("history_chars", "hc"),
        help="show a turn of a conversation with at most N characters of the turns before "
        "it, the oldest left out first (default: all of them)")
    extra: Mapping[str, Any] = _opt(
        default_factory=dict, hash=False, dest="judge_extra", flags=("--judge-extra",),
        append=True, metavar="KEY=VALUE", kind="params", doc="request fields of the server's own",
        parse=lambda items: parse_extra(items or ()),
        signed=Signed("extra", "x", text=_extra_text, when=bool),
        help="a request field of the server's own, sent as it is (repeatable; VALUE read as "
        "JSON where it is, else text): e.g. repeat_penalty=1.1 or cache_prompt=false for "
        "llama.cpp, top_k=1 for vLLM; part of the cache key and the signature")
    any_served_model: bool = _opt(
        default=False, dest="judge_any_served_model", flags=("--judge-any-served-model",),
        switch=True, kind="bool",
        help="reuse cached replies even when the endpoint now names another served model for "
        "--judge-model than they came from (by default the run stops)")
    max_retries: int = _opt(
        default=5, dest="judge_max_retries", flags=("--judge-max-retries",), type=int,
        metavar="N", kind="int", check=_int("--judge-max-retries", 0),
        help="retries of a request after a passing fault: 429, 5xx, timeout, dropped "
        "connection (default 5)")
    cache: str | None = _opt(
        default=None, flags=("--cache",), metavar="PATH", kind="path",
        help="judge reply cache: a SQLite file (default .rageval/cache.sqlite), or a JSONL "
        "export (rageval cache export) replayed as it is with --offline")
    offline: bool = _opt(
        default=False, flags=("--offline",), switch=True, kind="bool",
        help="replay judge replies from the cache only; never call the network")
    allow_missing: bool = _opt(
        default=False, flags=("--allow-missing",), switch=True, kind="bool",
        help="with --offline: leave records the cache lacks unscored instead of failing")
    refresh: bool = _opt(
        default=False, flags=("--refresh",), switch=True, kind="bool",
        help="ask the judge again even when a reply is cached (and store the new one)")
    prompts_dir: str | None = _opt(
        default=None, flags=("--prompts-dir",), metavar="DIR", kind="path",
        help="directory of rubric .toml files, looked up by name before the built-ins (also "
        "pairwise.toml and the claim-level steps, e.g. check_claims.toml)")
    temperature: float = _opt(
        default=0.0, dest="judge_temperature", flags=("--judge-temperature",), type=float,
        metavar="T", kind="float", check=_temperature,
        signed=Signed("temperature", "t", text=lambda t: f"{t:g}"),
        help="sampling temperature (default 0)")
    seed: int | None = _opt(
        default=None, dest="judge_seed", flags=("--judge-seed",), type=int, metavar="N",
        kind="int", check=_int("judge seed", 0), signed=Signed("seed", "sd"),
        help="seed sent with each request (sample i gets N+i)")
    samples: int = _opt(
        default=1, dest="judge_samples", flags=("--judge-samples",), type=int, metavar="N",
        kind="int", check=_int("judge samples", 1, MOST_SAMPLES), signed=Signed("samples", "n"),
        help="replies per item: the value is their mean, the spread goes in the details (use "
        "a temperature above 0)")
    logprobs: bool = _opt(
        default=False, dest="judge_logprobs", flags=("--judge-logprobs",), switch=True,
        kind="bool",
        signed=Signed("score", "sc", text=lambda on: "logprobs" if on else "reply").always(),
        help="score by the expected value of the score token's top log-probabilities "
        "(G-Eval); an endpoint that returns none is an error")
    price_in: float | None = _opt(
        default=None, dest="judge_price_in", flags=("--judge-price-in",), type=float,
        metavar="USD", kind="float", check=_price("--judge-price-in"),
        help="price per million prompt tokens, for the cost in the manifest")
    price_out: float | None = _opt(
        default=None, dest="judge_price_out", flags=("--judge-price-out",), type=float,
        metavar="USD", kind="float", check=_price("--judge-price-out"),
        help="price per million completion tokens, for the cost in the manifest")
    price_cached_in: float | None = _opt(
        default=None, dest="judge_price_cached_in", flags=("--judge-price-cached-in",),
        type=float, metavar="USD", kind="float", check=_price("--judge-price-cached-in"),
        help="price per million prompt tokens the endpoint reports read from its prompt cache "
        "(usage.prompt_tokens_details.cached_tokens), for the cost in the manifest; default: "
        "the --judge-price-in price")
    panel: tuple[Mapping[str, Any], ...] = _opt(
        default=(), hash=False, dest="judge_panel", flags=("--judge",), append=True,
        metavar="SPEC", kind="strings", doc="a judge panel's members (--judge specs)",
        parse=_panel,
        help="a member of a judge panel, repeatable (two or more): KEY=VALUE pairs joined by "
        "commas, of name, model, base_url, api_key_env, prompts_dir, seed, temperature (the "
        "rest as the --judge-* options say); each judge:* rubric is then graded by every "
        "member")
    panel_rule: str = _opt(
        default="mean", dest="judge_panel_rule", flags=("--judge-panel-rule",),
        choices=PANEL_RULES, kind="choice", doc="how the members' values make the panel's",
        help="how the members' values make the panel's: mean (default), median, or majority "
        "(a 0-1 verdict: more than half of all the members, abstentions counted)")
    panel_min_members: int | None = _opt(
        default=None, flags=("--panel-min-members",), type=int, metavar="N", kind="int",
        doc="members that must answer for the panel to go on without the others",
        help="let the panel go on while N members answer: a member whose judge answers "
        "nothing (or stops) is then left out, where by default it stops the run as a single "
        "judge would; recorded in the signature and the summary")
    max_requests: int | None = _opt(
        default=None, dest="judge_max_requests", flags=("--judge-max-requests",), type=int,
        metavar="N", kind="int", doc="judge requests sent at most",
        check=_int("--judge-max-requests", 1),
        help="send at most N judge requests in this run: the records left are unscored with "
        "the reason and the run exits with status 4 (every reply received is cached: a rerun "
        "with a higher cap asks only for the rest)")
    max_cost: float | None = _opt(
        default=None, dest="judge_max_cost", flags=("--judge-max-cost",), type=float,
        metavar="USD", kind="float", doc="USD this run may spend on the judge", check=_max_cost,
        help="stop before the judge request that would take this run's cost past USD (at "
        "--judge-price-in/--judge-price-out; estimated before each request, as a dry run "
        "estimates it); exit status 4 as with --judge-max-requests")
    against: str | None = _opt(
        default=None, dest="judge_against", flags=("--judge-against",), metavar="FILE",
        kind="path",
        help="judge:pairwise: the other system's records (paired by id), whose answers this "
        "run's answers are compared with")
    # Batch judging (rageval.judge.llm.batch): how replies are fetched, never what they are,
    # so none of these enters a cache key or a signature.
    batch: bool = _opt(
        default=False, dest="judge_batch", flags=("--judge-batch",), switch=True, kind="bool",
        help="send the requests the cache lacks through the provider's batch API (OpenAI's "
        "files and batches endpoints, a 24 h window) instead of one chat completion each; "
        "priced at --judge-batch-discount of the prices; a run killed while its batch is "
        "pending attaches to it when run again")
    batch_poll: float = _opt(
        default=30.0, dest="judge_batch_poll", flags=("--judge-batch-poll",), type=float,
        metavar="SECONDS", kind="float", check=_seconds("--judge-batch-poll"),
        help="with --judge-batch: seconds between two looks at a pending batch (default 30)")
    batch_discount: float = _opt(
        default=0.5, dest="judge_batch_discount", flags=("--judge-batch-discount",),
        type=float, metavar="FRACTION", kind="float", check=_fraction,
        help="with --judge-batch: what a batch request costs as a fraction of "
        "--judge-price-in/--judge-price-out (default 0.5, the major providers' discount)")
    batch_cancel: bool = _opt(
        default=False, dest="judge_batch_cancel", flags=("--judge-batch-cancel",),
        switch=True, kind="bool",
        help="cancel the batches recorded beside the cache for this endpoint and model, "
        "forget them, and stop (nothing is scored)")
    batch_file: str | None = _opt(
        default=None, dest="judge_batch_file", flags=("--judge-batch-file",), metavar="PATH",
        kind="path",
        help="with --judge-batch: write the batch's JSONL (the requests the cache lacks) to "
        "PATH and send nothing, for an offline batch runner such as vLLM's; import its output "
        "with 'rageval cache import OUTPUT --batch-input PATH'")
    # Send nothing: count what would be sent, and its tokens and cost.
    dry_run: bool = _opt(
        default=False, flags=("--dry-run",), switch=True,
        help="send nothing and write nothing: read the records and the judge cache, render "
        "every prompt, and print per rubric (and claim step) the requests a run would send, "
        "the cache hits, the estimated prompt and completion tokens and the cost at "
        "--judge-price-in/--judge-price-out")

    def __post_init__(self) -> None:
        # Read-only: what a signature and the cache keys were made from cannot change after.
        if isinstance(self.extra, Mapping) and not isinstance(self.extra, MappingProxyType):
            object.__setattr__(self, "extra", read_only(dict(self.extra)))
        if self.panel and not all(isinstance(m, MappingProxyType) for m in self.panel):
            object.__setattr__(self, "panel", tuple(read_only(dict(m)) for m in self.panel))

    @classmethod
    def given(cls, values: Mapping[str, Any]) -> dict[str, Any]:
        """The fields set by ``values``, an argparse namespace's (or an evaluation file's)
        options by destination, each parsed as its declaration says."""
        out = {}
        for option in JUDGE_OPTIONS:
            if option.dest in values:
                value = values[option.dest]
                out[option.field] = option.parse(value) if option.parse else value
        return out

    @property
    def cache_path(self) -> str:
        return self.cache if self.cache is not None else DEFAULT_CACHE

    @property
    def endpoint(self) -> str:
        """The endpoint's scheme, host, port and path: never a credential (signatures,
        manifests)."""
        return Endpoint.of(self.base_url).public

    @property
    def ladder(self) -> tuple[str, ...]:
        """The wire formats this run may ask in, most constrained first."""
        return LADDERS[self.response_format]

    def params(self, sample_index: int = 0, seed: int | None = None) -> dict[str, Any]:
        """The sampling parameters sent with one request (part of its cache key): the seed is
        ``seed`` when given, else the configured one plus ``sample_index``."""
        p: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            p["max_tokens"] = self.max_tokens
        if self.reasoning_effort is not None:
            p["reasoning_effort"] = self.reasoning_effort
        if seed is None and self.seed is not None:
            seed = self.seed + sample_index
        if seed is not None:
            p["seed"] = seed
        if self.logprobs:
            p.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        p.update(self.extra)
        return p

    def signed(self, *names: str) -> list[Field]:
        """The signature fields of the options ``names`` (fields of this configuration), in
        that order, each as its declaration says (:class:`~rageval.core.options.Signed`)."""
        out = []
        for name in names:
            signed = SIGNED[name]
            value = getattr(self, name)
            if signed.when(value):
                out.append(Field(signed.key, signed.text(value), signed.short))
        return out

    def cost_usd(self, usage: Mapping[str, int]) -> float | None:
        """USD for ``usage`` at ``price_in``/``price_out`` per million tokens (a price left out
        counts as 0), the prompt tokens the endpoint read from its prompt cache
        (``cached_prompt_tokens``) at ``price_cached_in`` (default: ``price_in``); None when
        neither price is given. Reasoning tokens are part of ``completion_tokens`` and are
        counted there, once."""
        if self.price_in is None and self.price_out is None:
            return None
        price_in = self.price_in or 0.0
        price_cached = price_in if self.price_cached_in is None else self.price_cached_in
        prompt = usage.get("prompt_tokens", 0)
        cached = min(usage.get("cached_prompt_tokens", 0), prompt)
        cost = ((prompt - cached) * price_in + cached * price_cached
                + usage.get("completion_tokens", 0) * (self.price_out or 0.0)) / 1e6
        return round(cost, 6)

    def check(self) -> None:
        """Raise a :class:`UsageError` for any invalid option (creates nothing)."""
        if not self.model:
            raise UsageError(
                "judge metrics need a judge model (--judge-model, or "
                "evaluate(..., judge=JudgeOptions(model=...))); it is part of the cache key, "
                "so an --offline replay needs it too"
            )
        if self.refresh and self.offline:
            raise UsageError("--refresh asks the judge again and cannot be used with --offline")
        if self.allow_missing and not self.offline:
            raise UsageError("--allow-missing only applies with --offline")
        for option in JUDGE_OPTIONS:
            value = getattr(self, option.field)
            if option.check is not None and value is not None:
                option.check(value)
        if self.max_cost is not None and self.price_in is None and self.price_out is None:
            raise UsageError("--judge-max-cost needs the prices to count the cost by: "
                             "--judge-price-in and --judge-price-out (USD per million tokens)")
        self._check_batch()
        check_panel(self)
        check_extra(self.extra)
        Endpoint.of(self.base_url)  # a malformed URL is a usage error, shown redacted
        self._check_cache_path()

    def members(self) -> list[tuple[str, Any]]:
        """The panel's members by name, each with the configuration it judges with (none
        without a panel)."""
        return panel_members(self)

    def _check_batch(self) -> None:
        if self.batch and self.offline:
            raise UsageError("--judge-batch sends requests and cannot be used with --offline")
        if self.batch_cancel and (self.offline or self.dry_run):
            raise UsageError("--judge-batch-cancel asks the provider to cancel batches: it "
                             "cannot be used with --offline or --dry-run")
        if self.batch_file is not None and not self.batch:
            raise UsageError("--judge-batch-file writes the batch of --judge-batch: give both")
        if self.batch and self.cache_path.endswith(".jsonl"):
            raise UsageError("--judge-batch stores its replies in a SQLite cache, not in a "
                             "JSONL export")

    def batch_cost(self, usage: Mapping[str, int]) -> float | None:
        """USD for ``usage`` of batch requests: :meth:`cost_usd` times ``batch_discount``."""
        cost = self.cost_usd(usage)
        return None if cost is None else round(cost * self.batch_discount, 6)

    def sent_cost(self, usage: Mapping[str, int]) -> float | None:
        """USD for ``usage`` of a request this run sends: by batch with ``batch``, else at the
        full prices (what the caps and a dry run count)."""
        return self.batch_cost(usage) if self.batch else self.cost_usd(usage)

    def _check_cache_path(self) -> None:
        path = self.cache_path
        if path.endswith(".jsonl") and not self.offline:
            raise UsageError(
                f"--cache {path}: a JSONL export can only be replayed (--offline); "
                "to extend it, load it into a SQLite cache with 'rageval cache import'"
            )
        if os.path.isdir(path):
            raise UsageError(f"--cache {path}: is a directory, expected a cache file")
        if not self.offline and not os.path.exists(path):
            problem = creatable(os.path.dirname(os.path.abspath(path)))
            if problem is not None:
                raise UsageError(f"--cache {path}: cannot create the cache: {problem}")


#: Every judge option, declared on :class:`JudgeConfig`'s fields (its ``[judge]`` table keys).
JUDGE_OPTIONS: tuple[Option, ...] = options_of(JudgeConfig, "judge")
# How each signed option is written in a signature, by field.
SIGNED: dict[str, Signed] = {o.field: o.signed for o in JUDGE_OPTIONS if o.signed is not None}


# Request fields rageval sets itself (each has its own option), or that would change what a
# reply is (several choices, a stream): never taken from --judge-extra.
_OWN_FIELDS = {
    "model": "--judge-model", "messages": "the rubric", "temperature": "--judge-temperature",
    "seed": "--judge-seed", "max_tokens": "--judge-max-tokens", "logprobs": "--judge-logprobs",
    "top_logprobs": "--judge-logprobs", "response_format": "--judge-response-format",
    "n": "--judge-samples", "reasoning_effort": "--judge-reasoning-effort",
    "stream": "nothing: replies are read whole",
    "stream_options": "nothing: replies are read whole",
}


def parse_extra(items: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` items (``--judge-extra``) as request fields: a VALUE that reads as JSON
    is that value (``1.1``, ``false``, ``["\\n"]``), any other is a string."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--judge-extra {item!r}: expected KEY=VALUE "
                             "(e.g. repeat_penalty=1.1)")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        if key in out:
            raise UsageError(f"--judge-extra {key} is given twice")
        out[key] = value
    return out


def check_extra(extra: Mapping[str, Any]) -> None:
    """Refuse extra request fields rageval sets itself, or that are not plain JSON."""
    if not isinstance(extra, Mapping):
        raise UsageError(f"judge extra must be a mapping of request fields, got "
                         f"{type(extra).__name__}")
    for key, value in extra.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise UsageError(f"judge extra field {key!r} is not a request field name")
        if key in _OWN_FIELDS:
            raise UsageError(f"judge extra field {key!r} is set by rageval itself (use "
                             f"{_OWN_FIELDS[key]})")
        if value is None:
            raise UsageError(f"judge extra field {key!r} is null: leave it out instead")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise UsageError(f"judge extra field {key!r} must be a JSON value (a string, "
                             f"number, boolean, list or table), got {value!r}") from None
