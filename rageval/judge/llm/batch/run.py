"""One round of batch judging: the requests the cache lacks sent as batches, polled, and each
reply stored in the cache under the key an online reply of the same request gets.

:func:`ask_by_batch` is what :func:`~rageval.judge.llm.replies.gather` calls with the pending
requests of a run with ``--judge-batch``: one round per call, so a run sends one round of
batches per window of records, per claim-level step and per panel member, each waited for
before the next. A :class:`BatchRound`:

1. attaches to the batches recorded beside the cache (:mod:`.state`) for this endpoint and
   model whose lines cover pending requests (a run killed while its batch was pending; one
   killed between uploading a batch's file and recording the batch finds the batch by its
   file, or creates it from that file), and forgets recorded batches whose replies are all
   cached or that the provider no longer knows (their requests are sent again);
2. sends the rest in the wire format the endpoint is known to accept, else the first of the
   mode's ladder not refused: a batch cannot negotiate per request. When every line of a batch
   that failed was refused for its response format (and none was answered), that format is
   refused for the run, as an online refusal would be, and those lines go again in the next
   format of the ladder. The parameters go as the endpoint is known to take them; lines
   refused for one (a reasoning model's ``max_tokens``) are adapted and sent again, as online
   requests are (:mod:`~rageval.judge.llm.transport.params`), and one that cannot be adapted
   stops the run;
3. splits the lines at the provider's limits (:mod:`.lines`), uploads each part, records it,
   creates its batch and records the batch's id before polling it (the progress shows its
   status, counts and time);
4. stores every good line (meta ``"via": "batch"`` and the batch id); a failed line leaves
   its request unscored with the provider's reason, as a failed online request does (a reply
   cut at its token limit before any text too); the lines an expired batch never ran are sent
   again in a new batch as long as it answered some (else they are left unscored, for a rerun
   to ask again), and so are those of a batch cancelled before this run attached to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rageval.judge.llm.batch.lines import LineOutcome, body_of, read_outcomes, request_line, split
from rageval.judge.llm.batch.provider import BatchGone, BatchProvider, BatchStatus
from rageval.judge.llm.batch.state import BatchState, Recorded, state_path
from rageval.judge.llm.transport.client import JudgeClient, JudgeRequest, cut_before_reply
from rageval.judge.llm.transport.formats import ReplySchema, is_refusal
from rageval.judge.llm.transport.params import Adaptation, defaulted, refused_param
from rageval.judge.llm.transport.requests import JudgeError
from rageval.judge.llm.transport.sdk import compact_logprobs, read_reply
from rageval.judge.llm.units import Reply, Unit, reply_meta

if TYPE_CHECKING:
    from rageval.core.records import Record
    from rageval.judge.llm.cache.store import NewReply
    from rageval.judge.llm.options import JudgeOptions
    from rageval.judge.llm.run_stats import RunStats
    from rageval.judge.llm.served import ServedCheck

__all__ = ["BatchRound", "ask_by_batch", "cancel_recorded"]


def ask_by_batch(judge: JudgeOptions, cache: Any, pending: list[Unit],
                 records: list[Record], schema: ReplySchema, stats: RunStats,
                 meta: Callable[[Any], dict[str, Any]], served: ServedCheck
                 ) -> dict[str, Reply]:
    """A reply (or an error) for every pending request, by its key, asked by batch (or, with
    ``batch_file``, written to that file for an offline runner and left unscored)."""
    if not pending:
        return {}
    if judge.batch_file is not None:
        from rageval.judge.llm.batch.offline import write_batch_file

        why = write_batch_file(judge, pending, schema)
        return {unit.key: Reply(error=why) for unit in pending}
    return BatchRound(judge, cache, records, schema, stats, meta, served).ask(pending)


class BatchRound:
    """The batches of one round of a run's requests (see the module's docstring)."""

    def __init__(self, judge: JudgeOptions, cache: Any, records: list[Record],
                 schema: ReplySchema, stats: RunStats, meta: Callable[[Any], dict[str, Any]],
                 served: ServedCheck) -> None:
        self.judge, self.cache, self.records, self.schema = judge, cache, records, schema
        self.stats, self.meta, self.served = stats, meta, served
        self.client = JudgeClient(judge, judge.session)
        self.provider = BatchProvider(judge)
        self.state = BatchState(state_path(judge.cache_path))
        self.endpoint = self.client.public_endpoint
        self.model = self.client.model
        self.out: dict[str, Reply] = {}
        self.total = 0

    def ask(self, pending: list[Unit]) -> dict[str, Reply]:
        self.total = self.stats.requests + len(pending)
        waiting = {unit.key: unit for unit in pending}
        try:
            self._stop_if_fatal()
            for recorded, covered in self._attachable(waiting):
                waiting.update(self._finish(recorded, covered, attached=True))
                self._stop_if_fatal()
            while waiting:
                fmt = self._format()
                if fmt is None:
                    refused = "; ".join(f"{f}: {why}" for f, why in
                                        self.client.refused_formats.items())
                    for unit in waiting.values():
                        self._fail(unit, f"the endpoint refuses the response format ({refused})",
                                   counted=False)
                    break
                again: dict[str, Unit] = {}
                for recorded, units in self._submit(list(waiting.values()), fmt):
                    again.update(self._finish(recorded, units, attached=False))
                self._stop_if_fatal()
                waiting = again
        finally:
            self.stats.refused.update(self.client.refused_formats)
            self.stats.refused_params.update(self.client.refused_params)
        return self.out

    def _stop_if_fatal(self) -> None:
        """Stop the run once the endpoint refused a parameter that cannot be adapted, as an
        online run stops: every later batch would be refused alike."""
        fatal = self.client.backend.params.fatal
        if fatal is not None:
            raise JudgeError(f"judge endpoint {self.client.endpoint.shown} (model "
                             f"{self.model!r}) {self.provider.redact(fatal)}")

    # -- which batches -----------------------------------------------------------------

    def _attachable(self, waiting: dict[str, Unit]
                    ) -> list[tuple[Recorded, dict[str, Unit]]]:
        """The recorded batches of this endpoint and model whose lines cover pending requests,
        each with them (taken out of ``waiting``); recorded batches whose replies are all
        cached are forgotten."""
        out = []
        stale = set()
        for recorded in self.state.load():
            if not recorded.of(self.endpoint, self.model):
                continue  # another judge's: left alone
            ids = set(recorded.custom_ids)
            covered = {key: unit for key, unit in waiting.items()
                       if unit.keys.get(recorded.format) in ids}
            if not covered:
                if not self.cache.missing(recorded.custom_ids):
                    stale.add(recorded.input_file_id)
                continue
            if not recorded.id:  # killed between uploading its file and recording its batch
                recorded = self._created(recorded)
            for key in covered:
                del waiting[key]
            out.append((recorded, covered))
        if stale:
            self.state.forget(stale)
        return out

    def _created(self, recorded: Recorded) -> Recorded:
        """The batch made of a recorded input file: found among the provider's, else created
        from the file now (no second upload); its id recorded."""
        batch_id = self.provider.find(recorded.input_file_id)
        if batch_id is None:
            batch_id = self.provider.create(recorded.input_file_id)
        recorded = replace(recorded, id=batch_id)
        self.state.update(recorded)
        return recorded

    def _format(self) -> str | None:
        """The wire format to send in: the first of the ladder the endpoint has not refused
        (the accepted one, once known)."""
        refused = self.client.backend.formats.refused
        return next((fmt for fmt in self.client.ladder if fmt not in refused), None)

    def _request(self, unit: Unit) -> JudgeRequest:
        seed = None if self.judge.seed is None else self.judge.seed + unit.sample
        return JudgeRequest(unit.messages, unit.schema or self.schema, unit.sample, seed=seed)

    def _submit(self, units: list[Unit], fmt: str
                ) -> list[tuple[Recorded, dict[str, Unit]]]:
        """Upload and create the batches of ``units`` in ``fmt``: each recorded once its file
        is uploaded, and again with its id once it is created. The parameters go as the
        endpoint is known to take them (:mod:`~rageval.judge.llm.transport.params`), the same
        for every line."""
        adaptation = self.client.backend.params.adaptation
        lines = []
        by_id: dict[str, Unit] = {}
        sent: dict[str, Any] = {}
        for unit in units:
            request = self._request(unit)
            wire = request.schema.wire(fmt) if request.schema is not None else None
            custom_id = unit.keys[fmt]
            by_id[custom_id] = unit
            params, sent = adaptation.apply(self.client.params(request))
            body = body_of(self.model, unit.messages, params, wire)
            lines.append((custom_id, request_line(custom_id, body)))
        out = []
        for part in split(lines):
            data = b"".join(line for _, line in part)
            file_id = self.provider.upload("rageval-batch.jsonl", data)
            recorded = Recorded(file_id, "", self.endpoint, self.model, fmt,
                                tuple(custom_id for custom_id, _ in part), sent)
            self.state.add(recorded)
            recorded = replace(recorded, id=self.provider.create(file_id))
            self.state.update(recorded)
            out.append((recorded, {by_id[c].key: by_id[c] for c, _ in part}))
        return out

    # -- one batch to its end ----------------------------------------------------------

    def _wait(self, recorded: Recorded) -> BatchStatus:
        started = time.monotonic()
        while True:
            status = self.provider.status(recorded.id)
            total = status.total or len(recorded.custom_ids)
            self.stats.tell(self.judge, self.total, self.stats.failed,
                            note=f"batch {recorded.id}: {status.status}, "
                                 f"{status.completed:,}/{total:,} done, {status.failed:,} "
                                 f"failed, {time.monotonic() - started:.0f} s")
            if status.finished:
                return status
            time.sleep(self.judge.batch_poll)

    def _finish(self, recorded: Recorded, units: dict[str, Unit], *, attached: bool
                ) -> dict[str, Unit]:
        """Wait for the batch, store its good lines, fail the others; the requests to send
        again (see :meth:`_sort`). ``attached``: a batch of an earlier run."""
        try:
            status = self._wait(recorded)
        except BatchGone:
            if not attached:
                raise
            self.state.forget({recorded.input_file_id})  # its requests are sent again
            return units
        if recorded.id not in self.stats.batches:
            self.stats.batches.append(recorded.id)
        texts = [self.provider.content(f) for f in (status.output_file_id,
                                                    status.error_file_id) if f]
        outcomes = read_outcomes(texts)
        arrived: list[NewReply] = []
        again = self._sort(recorded, units, outcomes, status, arrived, attached)
        if arrived:
            self.stats.stored += self.cache.put_many(arrived, replace=self.judge.refresh)
        claimed = {unit.keys[recorded.format] for unit in units.values()}
        # Lines answered (and paid for) that this round did not ask for wait for a later run.
        self.state.keep_only(recorded, [c for c in recorded.custom_ids if c not in claimed
                                        and c in outcomes and outcomes[c].ok])
        return again

    def _sort(self, recorded: Recorded, units: dict[str, Unit],
              outcomes: dict[str, LineOutcome], status: BatchStatus, arrived: list[NewReply],
              attached: bool) -> dict[str, Unit]:
        """Each request's line: stored, failed, or to send again (refused for its format or
        for a parameter taken adapted, or never run by a batch that expired after answering
        some or was cancelled before this run)."""
        fmt = recorded.format
        refused: dict[str, Unit] = {}
        refusals: list[str] = []
        by_param: dict[str, dict[str, Unit]] = {}
        left: dict[str, Unit] = {}
        for unit in units.values():
            outcome = outcomes.get(unit.keys[fmt])
            if outcome is None or outcome.unfinished:
                left[unit.key] = unit
            elif outcome.ok:
                self._store(unit, outcome, recorded, arrived)
            elif fmt != "text" and is_refusal(outcome.status or 0, outcome.error or ""):
                refused[unit.key] = unit
                refusals.append(self._reason(outcome))
            elif (param := refused_param(outcome.status or 0, outcome.body,
                                         outcome.error or "")) is not None:
                by_param.setdefault(param, {})[unit.key] = unit
            else:
                self._fail(unit, self._reason(outcome))
        answered = any(outcome.ok for outcome in outcomes.values())
        again = self._refused(fmt, refused, refusals, answered)
        again.update(self._adapted(recorded, by_param, outcomes))
        again.update(self._unanswered(status, left, answered, attached))
        return again

    def _adapted(self, recorded: Recorded, by_param: dict[str, dict[str, Unit]],
                 outcomes: dict[str, LineOutcome]) -> dict[str, Unit]:
        """Lines refused for a request parameter: adapted as an online request's are (sent
        again in the next batch), or unscored with what to change when it cannot be."""
        negotiation = self.client.backend.params
        again: dict[str, Unit] = {}
        for param, units in by_param.items():
            first = outcomes[next(iter(units.values())).keys[recorded.format]]
            why = self._reason(first)
            problem = negotiation.adapt(param, why, Adaptation.of_sent(recorded.sent))
            if problem is None:
                again.update(units)
                continue
            for unit in units.values():
                self._fail(unit, f"{why}: {problem}")
        return again

    def _refused(self, fmt: str, refused: dict[str, Unit], refusals: list[str],
                 answered: bool) -> dict[str, Unit]:
        """Lines refused for their format: the format is refused for the run and they go
        again in the next one, unless the endpoint answered others in it (then they fail)."""
        if answered:
            self.client.backend.formats.settle(fmt, accepted=True)
            for unit, why in zip(refused.values(), refusals, strict=True):
                self._fail(unit, why)
            return {}
        if refused:
            self.client.backend.formats.settle(fmt, accepted=False, why=refusals[0])
        return refused

    def _unanswered(self, status: BatchStatus, left: dict[str, Unit], answered: bool,
                    attached: bool) -> dict[str, Unit]:
        """Requests the batch never ran: sent again when it expired after answering some, or
        was cancelled before this run attached to it (a rerun after ``--judge-batch-cancel``
        wants its records scored); else unscored with why."""
        if (status.status == "expired" and answered) or (status.status == "cancelled"
                                                          and attached):
            return left
        if status.status == "failed":
            why = f"batch {status.id} failed: {status.errors or 'no reason given'}"
        elif status.status in ("expired", "cancelled"):
            why = f"batch {status.id} {status.status} before answering this request"
        else:
            why = f"batch {status.id} has no line for this request"
        for unit in left.values():
            self._fail(unit, why)
        return {}

    # -- one line --------------------------------------------------------------------------

    def _reason(self, outcome: LineOutcome) -> str:
        why = self.provider.redact(outcome.error or "no reason given")
        return f"HTTP {outcome.status}: {why}" if outcome.status is not None else why

    def _fail(self, unit: Unit, why: str, *, counted: bool = True) -> None:
        if counted:
            self.stats.requests += 1
        self.stats.failed += 1
        self.out[unit.key] = Reply(error=f"judge request failed: {why}")

    def _store(self, unit: Unit, outcome: LineOutcome, recorded: Recorded,
               arrived: list[NewReply]) -> None:
        """Keep one good line: counted, checked, and its reply on its way into the cache."""
        judge, stats, fmt = self.judge, self.stats, recorded.format
        try:
            reply = read_reply(outcome.body or {})
        except ValueError as exc:
            self._fail(unit, f"malformed response in the batch's output: {exc}")
            return
        stats.add_usage(reply.usage, cached=False)
        stats.add_batch_usage(reply.usage)
        if judge.budget is not None:
            judge.budget.received(judge, reply.usage)
        logprobs = compact_logprobs(reply.logprobs) if judge.logprobs else None
        cut = cut_before_reply(outcome.body or {}, reply.text,
                               self.client.params(self._request(unit)), recorded.sent)
        failure = cut or reply.failure or (
            "the reply holds no log-probabilities" if judge.logprobs and logprobs is None
            else None)
        if failure is not None:
            self._fail(unit, failure)  # not cached: a rerun asks again
            return
        stats.requests += 1
        stats.batched += 1
        stats.replied.add(f"{judge.model}@{judge.endpoint}")
        self.served.check(reply.model)
        extra = reply_meta(unit, self.records, self.meta(unit), fmt=fmt,
                           finish_reason=reply.finish_reason, served_model=reply.model,
                           logprobs=logprobs, sent=recorded.sent)
        extra.update(via="batch", batch=recorded.id)
        summary = self.client.request_summary(self._request(unit), fmt)
        arrived.append((unit.keys[fmt], summary, reply.text or "", reply.usage, extra,
                        unit.request_id))
        self.out[unit.key] = Reply(reply.text, logprobs, format=fmt, endpoint=self.endpoint,
                                   finish_reason=reply.finish_reason, served_model=reply.model,
                                   defaults=defaulted(recorded.sent))


def cancel_recorded(judge: JudgeOptions) -> list[tuple[str, str]]:
    """Cancel the batches recorded beside the cache for ``judge``'s endpoint and model; each
    batch's id and its status after (those of other judges left alone). They stay recorded:
    the next run attaches to them, stores the lines they answered (paid for) and sends the
    rest again. A batch the provider does not know, or one never created, is forgotten."""
    state = BatchState(state_path(judge.cache_path))
    endpoint = JudgeClient(judge, judge.session).public_endpoint
    provider = BatchProvider(judge)
    done: list[tuple[str, str]] = []
    for recorded in state.load():
        if not recorded.of(endpoint, judge.model or ""):
            continue
        batch_id = recorded.id or provider.find(recorded.input_file_id)
        if batch_id is None:
            state.forget({recorded.input_file_id})
            done.append((f"of file {recorded.input_file_id}", "never created: forgotten"))
            continue
        try:
            done.append((batch_id, provider.cancel(batch_id)))
        except BatchGone:
            state.forget({recorded.input_file_id})
            done.append((batch_id, "unknown to the provider: forgotten"))
    return done
