"""The manifest of a run: what it read, the metrics as they sign it, where its judgments came
from, the bootstrap, and the version of every library a value rests on; then the sections the
metrics' run hooks and the judgments provider add."""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from rageval.core.metric import Metric
from rageval.core.version import __version__

__all__ = ["judge_sections", "run_manifest"]

# What a manifest section of judge work holds (rageval.judge.llm.checks.judge_section).
_JUDGE_WORK = ("usage", "requests", "failed", "cost_usd")
# Libraries every run's values rest on; each metric adds its own (Metric.libraries).
_ALWAYS_VERSIONED = ("numpy", "polars")


def run_manifest(records: Mapping[str, Any], metrics: Sequence[Metric],
                 helpers: Sequence[Metric], seed: int, bootstrap: int,
                 sections: Mapping[str, Any], ci: str = "records") -> dict[str, Any]:
    """The manifest of a run over ``records`` (its ``source``, ``count`` and, for records
    read through an input spec, ``inputs``), signed by ``metrics`` (all under the run's final
    options); ``helpers`` are the judgments provider's metrics, whose libraries count too.
    ``sections`` (by manifest key) never replace a key of the core or each other. ``ci``:
    how the intervals were drawn (``judge-noise``: the metrics judged with several samples
    resample them within each record too)."""
    options = metrics[0].options
    manifest = {
        "rageval": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "records": dict(records),
        "metrics": [str(m) for m in metrics],
        "judgments": options.judgments_source,
        "trec_convention": options.trec_convention,
        "bootstrap": {"resamples": bootstrap, "seed": seed, "level": 0.95,
                      "method": "percentile", **({"ci": ci} if ci != "records" else {})},
        "versions": _versions([*metrics, *helpers]),
    }
    for key, section in sections.items():
        if section is None:
            continue
        if key in manifest:
            raise RuntimeError(f"two parts of the run write the manifest key {key!r}")
        manifest[key] = section
    return manifest


def _versions(metrics: Sequence[Metric]) -> dict[str, str]:
    """Versions of the libraries that can change a value, read from package metadata."""
    out = {"python": platform.python_version()}
    wanted = dict.fromkeys([*_ALWAYS_VERSIONED, *(lib for m in metrics for lib in m.libraries)])
    for package in wanted:
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return out


def judge_sections(manifest: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The manifest's sections of judge work, by key (``judge``, ``judge_panel``,
    ``claims``, ...), found by what they hold rather than by name: each counts its own
    requests, tokens, caps and dry-run plan."""
    return {key: section for key, section in manifest.items()
            if isinstance(section, Mapping) and any(k in section for k in _JUDGE_WORK)}
