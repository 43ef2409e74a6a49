"""One round of batch judging: the requests the cache lacks sent as batches, polled, and each
reply stored in the cache under the key an online reply of the same request gets.

:func:`ask_by_batch` is what :func:`~rageval.judge.llm.replies.gather` calls with the pending
requests of a run with ``--judge-batch``. A :class:`BatchRound`:

1. attaches to the batches recorded beside the cache (:mod:`.state`) for this endpoint and
   model whose lines cover pending requests (a run killed while its batch was pending), and
   forgets recorded batches whose replies are all cached;
2. sends the rest in the wire format the endpoint is known to accept, else the first of the
   mode's ladder not refused: a batch cannot negotiate per request. When every line of a batch
   that failed was refused for its response format (and none was answered), that format is
   refused for the run, as an online refusal would be, and those lines go again in the next
   format of the ladder. The parameters go as the endpoint is known to take them; lines
   refused for one (a reasoning model's ``max_tokens``) are adapted and sent again, as online
   requests are (:mod:`~rageval.judge.llm.transport.params`);
3. splits the lines at the provider's limits (:mod:`.lines`), uploads each part, creates its
   batch and records it before polling it (the progress shows its status, counts and time);
4. stores every good line (meta ``"via": "batch"`` and the batch id); a failed line leaves
   its request unscored with the provider's reason, as a failed online request does; an
   expired batch's answered lines are kept and the rest sent again in a new batch (as long as
   the expired batch answered some: else they are left unscored, for a rerun to ask again).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rageval.judge.llm.batch.lines import LineOutcome, body_of, read_outcomes, request_line, split
from rageval.judge.llm.batch.provider import BatchProvider, BatchStatus
from rageval.judge.llm.batch.state import BatchState, Recorded, state_path
from rageval.judge.llm.transport.client import JudgeClient, JudgeRequest
from rageval.judge.llm.transport.formats import ReplySchema, is_refusal
from rageval.judge.llm.transport.params import Adaptation, defaulted, refused_param
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
            for recorded, covered in self._attachable(waiting):
                waiting.update(self._finish(recorded, covered))
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
                    again.update(self._finish(recorded, units))
                waiting = again
        finally:
            self.stats.refused.update(self.client.refused_formats)
            self.stats.refused_params.update(self.client.refused_params)
        return self.out

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
            if covered:
                for key in covered:
                    del waiting[key]
                out.append((recorded, covered))
            elif not self.cache.missing(recorded.custom_ids):
                stale.add(recorded.id)
        if stale:
            self.state.forget(stale)
        return out

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
        """Upload and create the batches of ``units`` in ``fmt``, each recorded at once. The
        parameters go as the endpoint is known to take them (a reasoning model's:
        :mod:`~rageval.judge.llm.transport.params`), the same for every line."""
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
            batch_id = self.provider.create(file_id)
            recorded = Recorded(batch_id, file_id, self.endpoint, self.model, fmt,
                                [custom_id for custom_id, _ in part], sent=sent)
            self.state.add(recorded)
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

    def _finish(self, recorded: Recorded, units: dict[str, Unit]) -> dict[str, Unit]:
        """Wait for the batch, store its good lines, fail the others; the requests to send
        again (refused for their format or for a parameter the endpoint takes adapted, or
        left by an expired batch that answered some)."""
        status = self._wait(recorded)
        if recorded.id not in self.stats.batches:
            self.stats.batches.append(recorded.id)
        texts = [self.provider.content(f) for f in (status.output_file_id,
                                                    status.error_file_id) if f]
        outcomes = read_outcomes(texts)
        fmt = recorded.format
        arrived: list[NewReply] = []
        refused: dict[str, Unit] = {}
        refusals: list[str] = []
        by_param: dict[str, dict[str, Unit]] = {}
        left: dict[str, Unit] = {}
        for unit in units.values():
            outcome = outcomes.get(unit.keys[fmt])
            if outcome is None:
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
        answered = any(outcomes.get(u.keys[fmt]) is not None and outcomes[u.keys[fmt]].ok
                       for u in units.values())
        again = self._refused(fmt, refused, refusals, answered)
        again.update(self._adapted(recorded, by_param, outcomes))
        again.update(self._unanswered(status, left, bool(outcomes)))
        if arrived:
            self.stats.stored += self.cache.put_many(arrived, replace=self.judge.refresh)
        self.state.forget({recorded.id})
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

    def _unanswered(self, status: BatchStatus, left: dict[str, Unit],
                    some_answered: bool) -> dict[str, Unit]:
        """Requests the batch has no line for: sent again when it expired after answering
        some, else unscored with why."""
        if status.status == "expired" and some_answered:
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
        if reply.failure is not None or (judge.logprobs and logprobs is None):
            self._fail(unit, reply.failure or "the reply holds no log-probabilities")
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
    """Cancel the batches recorded beside the cache for ``judge``'s endpoint and model and
    forget them; each batch's id and its status after (those of other judges left alone)."""
    state = BatchState(state_path(judge.cache_path))
    endpoint = JudgeClient(judge, judge.session).public_endpoint
    provider = BatchProvider(judge)
    done: list[tuple[str, str]] = []
    for recorded in state.load():
        if recorded.of(endpoint, judge.model or ""):
            done.append((recorded.id, provider.cancel(recorded.id)))
            state.forget({recorded.id})
    return done
