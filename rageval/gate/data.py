"""Whether a baseline scored the same evaluation set as this run, from the digests in both
manifests.

Each run's manifest holds a ``data`` section (:mod:`rageval.core.records.digest`): digests of
the record ids, of each field the metrics read, and per output of the evaluation set it reads
(the ids, the queries, references and judgments it uses, and the judge's configuration for judge
outputs; not the answers and contexts, which are what two systems are compared on). A
regression gate compares the digests of the outputs it checks: where they differ, the
baseline's numbers are about other records, other references or judgments, or another judge,
and a drop or a rise says nothing about the change under test. The gate then refuses, naming
what differs (the records added and dropped, the fields, the judge's configuration), unless the
difference is allowed (``--allow-data-change``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rageval.core.records.digest import SET_FIELDS
from rageval.core.results import Results
from rageval.gate.model import GateRow

__all__ = ["data_row"]

_SHOWN_IDS = 3
_RULE = "same data as the baseline"


def data_row(results: Results, baseline: Results, names: Sequence[str],
             allow: bool) -> GateRow | None:
    """A row saying whether the outputs ``names`` were scored on the baseline's data: failing
    when they were not (unless ``allow``), passing with a note when a baseline has no digest
    (written before rageval kept one); None when every digest matches."""
    ours, theirs = _section(results), _section(baseline)
    if ours is None and theirs is None:
        return None  # results built by hand: nothing to check, nothing to say
    if theirs is None or ours is None:
        which = "the baseline" if theirs is None else "this run"
        return GateRow("regression", "data", _RULE, None, True,
                       f"{which} has no data digest (written by an older rageval): the data "
                       "was not checked")
    changed = [n for n in names
               if ours["metrics"].get(n) != theirs["metrics"].get(n)]
    if not changed:
        return None
    what = "; ".join(_differences(results, baseline, ours, theirs))
    shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    if allow:
        note = f"data changed for {shown} (allowed by --allow-data-change): {what}"
        return GateRow("regression", "data", _RULE, None, True, note)
    note = (f"the baseline scored other data for {shown}: {what}; its numbers do not measure "
            "this change (give --allow-data-change, or allow_data_change=True, to compare "
            "anyway)")
    return GateRow("regression", "data", _RULE, None, False, note)


def _section(results: Results) -> Mapping[str, Any] | None:
    section = results.manifest.get("data")
    if not isinstance(section, Mapping) or not isinstance(section.get("metrics"), Mapping):
        return None
    return section


def _differences(results: Results, baseline: Results, ours: Mapping[str, Any],
                 theirs: Mapping[str, Any]) -> list[str]:
    """What differs, in words: records added and dropped, fields, the judge."""
    out = []
    if ours.get("ids") != theirs.get("ids"):
        base_ids = {r.id for r in baseline.records}
        our_ids = [r.id for r in results.records]
        added = [i for i in our_ids if i not in base_ids]
        kept = set(our_ids)
        dropped = [r.id for r in baseline.records if r.id not in kept]
        for word, ids in (("added", added), ("dropped", dropped)):
            if ids:
                out.append(f"{len(ids)} records {word} ({_ids(ids)})")
    else:  # the same records: a field digest that differs is a field that changed
        mine, base = ours.get("fields", {}), theirs.get("fields", {})
        fields = [f for f in SET_FIELDS if (f in mine or f in base)
                  and mine.get(f) != base.get(f)]
        if fields:
            out.append(f"the same record ids, with other {', '.join(fields)}")
    if ours.get("judge") != theirs.get("judge"):
        out.append("the judge's configuration differs")
    return out or ["the digests differ"]


def _ids(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:_SHOWN_IDS])
    return shown + (f" and {len(ids) - _SHOWN_IDS} more" if len(ids) > _SHOWN_IDS else "")
