"""A run as JUnit XML (``rageval score --junit FILE``), the report format CI systems already
show: one test suite for the run, one test case per gate check (a ``<failure>`` giving the
value, the rule and the 95% CI when the check fails) and one per metric that left records
unscored (an ``<error>`` giving how many, and why).

The file follows the common JUnit schema (Jenkins' and Ant's): ``testsuites`` holding
``testsuite`` elements with ``tests``, ``failures``, ``errors``, ``skipped``, ``time`` and
``timestamp``, ``properties``, and ``testcase`` elements with ``classname``, ``name`` and
``time``.

Every text in it (names, paths, notes, unscored reasons quoting endpoint errors) goes through
:func:`rageval.core.outputs.text.xml_text` after the run's
:class:`~rageval.core.outputs.masking.Masker`: the file holds only characters XML 1.0 allows,
and the serializer escapes the rest. A failed check is said from its one description
(:func:`rageval.gate.describe.describe`): the value, the baseline's, the difference and the
rule, each labelled.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rageval.core.outputs.masking import NO_SECRETS, Masker
from rageval.core.outputs.text import xml_text
from rageval.core.results import MetricSummary, Results, count_of
from rageval.gate.describe import describe
from rageval.gate.model import GateRow, format_number

if TYPE_CHECKING:
    from rageval.gate.model import GateReport

__all__ = ["junit_xml"]


def junit_xml(results: Results, report: GateReport | None, name: str,
              masker: Masker = NO_SECRETS) -> str:
    """The JUnit XML of one run (``name``: the suite's name, e.g. the run's records or
    directory) and of its gate (``report``; None: no gate was asked for), every credential
    ``masker`` knows masked."""
    rows = report.rows if report is not None else []
    suite = ET.Element("testsuite", name=name, timestamp=str(results.manifest.get("created",
                                                                                  "")))
    properties = ET.SubElement(suite, "properties")
    for key, value in (("rageval", results.manifest.get("rageval")),
                       ("records", results.records_info.source),
                       ("records_count", results.records_info.count)):
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=str(value))
    failures = sum(1 for row in rows if not row.passed)
    for row in rows:
        _gate_case(suite, row, results.summary.get(row.metric))
    unscored = _unscored(results.summary)
    for metric, item in unscored:
        _unscored_case(suite, metric, item)
    wall = float(results.manifest.get("wall_time_s") or 0.0)
    counts = {"tests": len(rows) + len(unscored), "failures": failures,
              "errors": len(unscored), "skipped": 0}
    suite.attrib.update({key: str(value) for key, value in counts.items()})
    suite.set("time", f"{wall:.3f}")
    root = ET.Element("testsuites", name="rageval", time=f"{wall:.3f}",
                      **{key: str(value) for key, value in counts.items() if key != "skipped"})
    root.append(suite)
    _make_safe(root, masker)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _gate_case(suite: ET.Element, row: GateRow, item: MetricSummary | None) -> None:
    case = ET.SubElement(suite, "testcase", classname=f"rageval.gate.{row.check}",
                         name=f"{row.metric} {row.rule}", time="0")
    if row.passed:
        return
    ci = ("" if item is None or item.ci95 is None or row.metric == "data"
          else f"; the value's 95% CI [{format_number(item.ci95[0])}, "
               f"{format_number(item.ci95[1])}]")
    found = describe(row).sentence
    failure = ET.SubElement(case, "failure", message=found + ci, type="gate")
    failure.text = found + ci + (f"\n{row.note}" if row.note else "")


def _make_safe(root: ET.Element, mask: Masker) -> None:
    """Every attribute and text of the tree masked and holding only what XML 1.0 allows."""
    for element in root.iter():
        for key, value in element.attrib.items():
            element.set(key, xml_text(mask(value)))
        if element.text:
            element.text = xml_text(mask(element.text))


def _unscored(summary: dict[str, MetricSummary]) -> list[tuple[str, MetricSummary]]:
    """The metrics with unscored records, once per metric (its components share its
    reasons)."""
    seen: set[str] = set()
    out = []
    for metric, item in summary.items():
        if item.unscored and item.signature not in seen:
            seen.add(item.signature)
            out.append((metric, item))
    return out


def _unscored_case(suite: ET.Element, metric: str, item: MetricSummary) -> None:
    case = ET.SubElement(suite, "testcase", classname="rageval.unscored", name=metric,
                         time="0")
    total = item.n + item.unscored
    message = f"{metric}: {count_of(item.unscored, 'record')} of {total} unscored"
    error = ET.SubElement(case, "error", message=message, type="unscored")
    error.text = "\n".join(f"{count}: {reason}" for reason, count in _reasons(item.reasons))


def _reasons(reasons: dict[str, int]) -> Sequence[tuple[str, int]]:
    return sorted(reasons.items(), key=lambda pair: (-pair[1], pair[0]))
