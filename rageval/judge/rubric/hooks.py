"""The judge metrics' run hooks (:data:`JUDGE_HOOKS`): the checks before any scoring and the
manifest's ``judge`` section.

:func:`check_judge` runs before anything is read from the judge, written or sent: every option
is valid, every judge metric can run, an offline replay finds every reply it needs, and a run
that must ask the judge has the API key it needs. :func:`judge_manifest` is the manifest's
``judge`` section. Both get the run's judge metrics (rubric and pairwise alike) and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from rageval.core.metric import Metric, RunHooks, Slot
from rageval.judge.llm.cache.store import Stored
from rageval.judge.llm.checks import check_cached, judge_section
from rageval.judge.llm.options import JudgeOptions
from rageval.judge.llm.run_stats import RunStats
from rageval.judge.llm.transport.endpoint import api_key_problem
from rageval.judge.llm.units import Unit
from rageval.judge.prompting.prompt_files import prompt_info
from rageval.judge.rubric.render import RENDER_VERSION

if TYPE_CHECKING:
    from rageval.core.metric import Batch
    from rageval.core.records import Record
    from rageval.judge.llm.transport.formats import ReplySchema
    from rageval.judge.rubric.rubrics import Rubric

__all__ = ["GROUP", "JUDGE_HOOKS", "JudgeHooks", "Rendered", "check_judge", "judge_manifest",
           "rendered_units"]


class JudgedMetric(Protocol):
    """What the hooks use of a judge metric (:class:`~rageval.judge.rubric.metric.JudgeMetric`)."""

    rubric: Rubric

    @property
    def judge(self) -> JudgeOptions: ...

    def ready(self) -> None: ...

    def units(self, record: Record, index: int = 0) -> list[Unit]: ...

    def reply_schema(self) -> ReplySchema: ...


class JudgeHooks(RunHooks):
    """The run hooks every judge metric shares: one cache, one endpoint, one manifest section."""

    section = "judge"

    def check(self, records: Sequence[Record], metrics: Sequence[Metric]) -> None:
        check_judge(records, _judged(metrics))

    def prepare(self, run: Batch, metrics: Sequence[Metric]) -> None:
        # Every judge metric of the run asks in one stream (JudgeMetric.batch_replies). Filled
        # in place: a metric that gathered before (the judgments provider's) found it empty.
        run.cached(GROUP, list)[:] = metrics

    def manifest(self, run: Batch, metrics: Sequence[Metric]) -> dict[str, Any] | None:
        return judge_manifest(run, _judged(metrics))


JUDGE_HOOKS = JudgeHooks()
# The run's judge metrics, in a window's run Batch cache (set by JudgeHooks.prepare).
GROUP = Slot[list[Metric]](("judge", "metrics"))
# The run's account of the rubric judge's work (the manifest's ``judge`` section).
JUDGE_STATS = Slot[RunStats](("judge", "stats"))


def _judged(metrics: Sequence[Metric]) -> list[JudgedMetric]:
    return list(metrics)  # type: ignore[arg-type]  # the hooks are given judge metrics only


def check_judge(records: Sequence[Record], judged: Sequence[JudgedMetric]) -> None:
    """Before any scoring: every judge option is valid; an offline run without
    ``allow_missing`` finds every reply it needs in the cache (else :class:`OfflineCacheMiss`
    listing how many are missing and the first few record ids and criteria); a run that has to
    ask the judge has its API key (else :class:`~rageval.judge.llm.transport.client.JudgeError`)."""
    if not judged:
        return
    judge = judged[0].judge
    judge.check()
    for metric in judged:
        metric.ready()
    if (judge.offline and judge.allow_missing) or judge.dry_run:  # nothing is sent
        return
    if not judge.offline and api_key_problem(judge.api_key_env, judge.base_url) is None:
        # Whatever the cache lacks can be asked for: rendering every request and looking it
        # up here would only delay the first request (scoring looks them up anyway).
        return
    wanted: dict[str, tuple[Unit, str, str]] = {}  # identity key -> (unit, record id, rubric)
    rendered: list[_Rendered] = []
    for metric in judged:
        schema = metric.reply_schema()
        units = [metric.units(record, i) for i, record in enumerate(records)]
        rendered.append(_Rendered(metric.judge, records, units))
        for record, record_units in zip(records, units, strict=True):
            for unit in record_units:
                if unit.schema is None:  # carried so that a miss can be explained
                    unit = replace(unit, schema=schema)
                wanted.setdefault(unit.key, (unit, record.id, metric.rubric.id))
    found: dict[str, Stored] = {}
    check_cached(judge, wanted, found)
    # The scoring of these records asks for the same requests: rendering them is most of a
    # replay's work, so they are not rendered again, nor their replies read again
    # (rendered_units).
    for metric, kept in zip(judged, rendered, strict=True):
        metric.judge.session.hand_over((_RENDERED, str(metric)), replace(kept, found=found))


_RENDERED = "judge units rendered by the check"


@dataclass(frozen=True)
class _Rendered:
    """A metric's requests of each of ``records`` (by position; the unit's record index is
    that position), rendered under ``judge``, and the replies the check found in the cache
    for the run's requests (by key)."""

    judge: JudgeOptions
    records: Sequence[Record]
    units: list[list[Unit]]
    found: Mapping[str, Stored] = field(default_factory=dict)


class Rendered(NamedTuple):
    """What :func:`rendered_units` hands over: each record's requests, and the replies the
    check read for them (by key; those it did not find are looked up when scored)."""

    units: list[list[Unit]]
    found: Mapping[str, Stored]


def rendered_units(metric: JudgedMetric, records: Sequence[Record]) -> Rendered | None:
    """The requests of each of ``records`` that :func:`check_judge` rendered for ``metric``
    (indexed by position in ``records``) and the replies it read, handed over once; None when
    it rendered none for these very records under this judge."""
    session = metric.judge.session
    kept = session.take_over((_RENDERED, str(metric)))
    if not isinstance(kept, _Rendered):
        return None
    if (kept.judge != metric.judge or len(kept.records) != len(records)
            or any(a is not b for a, b in zip(kept.records, records, strict=True))):
        session.hand_over((_RENDERED, str(metric)), kept)  # left for the records it is of
        return None
    return Rendered(kept.units, kept.found)


def judge_manifest(run: Batch, judged: Sequence[JudgedMetric]) -> dict[str, Any] | None:
    """The manifest's ``judge`` section: model, endpoint, response formats, prompt hashes,
    cache and tokens."""
    if not judged:
        return None
    judge = judged[0].judge
    stats = run.run_wide(JUDGE_STATS, RunStats)
    prompts = dict(stats.prompts)
    for metric in judged:
        prompts.setdefault(metric.rubric.id, prompt_info(metric.rubric))
    return judge_section(judge, stats, prompts, RENDER_VERSION)


