"""Human labels carried by records: a top-level field holding one number, or an object mapping
criteria to numbers (``{"human": {"faithfulness": 4, "correctness": 5}}``), read as ``rageval
agree --human FIELD`` reads them and as a scored run reads them to calibrate its judge means
(:class:`LabelColumns`)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rageval.core.errors import InputError, UsageError
from rageval.core.records.model import Record

__all__ = ["LabelColumns", "label_keys", "parse_label", "parse_number"]

Label = float | dict[str, float | None] | None


def label_keys(names: Iterable[str]) -> list[str]:
    """Keys a human label object may use for a metric: the full output name, then without its
    namespace (``judge:``), without parameters, and the file stem of a rubric given by path."""
    keys: dict[str, None] = {}
    for name in names:
        namespace, sep, target = name.partition(":")
        if not sep or not namespace.isidentifier():
            namespace, target = "", name
        base = target.split("(", 1)[0]
        prefixed = [f"{namespace}:{base}"] if namespace else []
        for key in (name, target, *prefixed, base, Path(base).stem):
            keys.setdefault(key, None)
    return list(keys)


def parse_label(value: Any, record_id: str, field_name: str, path: str) -> Label:
    """A record's label field: a number, an object of numbers (a CSV cell may hold it as
    JSON), or None when absent."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)  # a CSV cell holding a JSON object
        except ValueError:
            raise InputError(f"record {record_id!r}: human label is not a valid JSON object",
                             path=path, field=field_name) from None
    if isinstance(value, Mapping):
        return {str(k): parse_number(v, record_id, f"{field_name}.{k}", path)
                for k, v in value.items()}
    return parse_number(value, record_id, field_name, path)


def parse_number(value: Any, record_id: str, field_name: str, path: str) -> float | None:
    """A finite number; a numeric string (CSV cells are strings); None or "" for missing."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = None
    if number is None or not math.isfinite(number):
        raise InputError(f"record {record_id!r}: human label must be a finite number, found "
                         f"{value!r}", path=path, field=field_name)
    return number


class LabelColumns:
    """The human labels of a run's records, taken window by window for the metrics a judge
    scores on a fixed scale (``scales``: metric name -> (lowest, highest)): for each, one
    number per record, NaN where the record has none. A label outside its metric's scale is an
    :class:`InputError` naming the records file (``source``), the record and the field.

    A record's label is one number only when one metric is calibrated; with several, an object
    that maps each metric (``faithfulness`` or ``judge:faithfulness``) to its label."""

    def __init__(self, field: str, scales: Mapping[str, tuple[float, float]],
                 source: str) -> None:
        self.field = field
        self.scales = dict(scales)
        self.source = source
        self._keys = {name: label_keys([name]) for name in self.scales}
        self.found = 0  # records with any label

    @classmethod
    def of(cls, field: str, metrics: Sequence[tuple[str, tuple[float, float] | None]],
           source: str) -> LabelColumns:
        """The labels of a run's metrics on a fixed scale (``metrics``: name and scale, None
        for a metric without one); a usage error when no metric has one."""
        scales = {name: scale for name, scale in metrics if scale is not None}
        if not scales:
            raise UsageError(f"human labels ({field!r}) calibrate metrics scored on a fixed "
                             f"scale (a rubric's), and no metric of the run is: "
                             f"{', '.join(name for name, _ in metrics)}")
        return cls(field, scales, source)

    def take(self, records: Sequence[Record]) -> dict[str, list[float]]:
        """Each metric's labels for these records, in their order."""
        out: dict[str, list[float]] = {name: [] for name in self.scales}
        for record in records:
            try:
                label = parse_label(record.extra.get(self.field), record.id, self.field,
                                    self.source)
                for name, values in out.items():
                    values.append(self._label(record.id, label, name))
            except InputError as error:
                raise InputError(error.message, path=error.path, field=error.field,
                                 line=_line_of(self.source, record.id)) from None
            self.found += label is not None
        return out

    def _label(self, record_id: str, label: Label, name: str) -> float:
        field = self.field
        if isinstance(label, dict):
            key = next((k for k in self._keys[name] if label.get(k) is not None), None)
            if key is None:
                return math.nan
            label, field = label[key], f"{self.field}.{key}"
        elif label is not None and len(self.scales) > 1:
            raise UsageError(
                f"record {record_id!r}: human label {self.field!r} holds a single number, but "
                f"{len(self.scales)} judge metrics are scored ({', '.join(self.scales)}); give "
                f"an object mapping each to its label (\"{self.field}\": "
                f"{{\"{_short(next(iter(self.scales)))}\": 4, ...}})")
        if label is None:
            return math.nan
        low, high = self.scales[name]
        if not low <= label <= high:
            raise InputError(f"record {record_id!r}: human label {label:g} for {name} is outside "
                             f"its scale {low:g}-{high:g}", path=self.source, field=field)
        return float(label)


def _line_of(path: str, record_id: str) -> int | None:
    """The line of a JSON Lines records file that holds ``record_id`` (read only when a label
    there is wrong); None for other formats, or when it cannot be found."""
    if not path.endswith((".jsonl", ".ndjson")):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            for number, text in enumerate(handle, 1):
                try:
                    item = json.loads(text)
                except ValueError:
                    continue
                if isinstance(item, dict) and str(item.get("id")) == record_id:
                    return number
    except OSError:
        return None
    return None


def _short(name: str) -> str:
    return label_keys([name])[1] if ":" in name else name
