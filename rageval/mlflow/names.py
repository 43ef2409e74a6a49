"""rageval's metric names as MLflow metric keys, one to one.

MLflow accepts letters, digits, ``_``, ``-``, ``.``, spaces and ``/`` in a key on every
platform (a ``:`` only off Windows), and refuses a key that a file path would read as another
(``a//b``, ``../a``). rageval's names hold more (``ndcg@10``, ``judge:faithfulness``,
``p(rel=2)@5``), so each is written as a key by these rules, in this order:

``@`` -> ``_at_``
    ``ndcg@10`` -> ``ndcg_at_10``
``:`` -> ``/``
    ``judge:faithfulness`` -> ``judge/faithfulness`` (MLflow groups keys by their prefix)
any other character MLflow refuses -> ``_``
    ``p(rel=2)@5`` -> ``p_rel_2_at_5``, ``ndcg(gain=exp)@3`` -> ``ndcg_gain_exp_at_3``

then runs of ``_`` are made one, and ``_`` is taken off the ends and from beside a ``/``. A
component keeps its dot (``rouge2.precision``). The ends of a value's 95% CI go beside it as
``<key>.ci95_low`` and ``<key>.ci95_high``; a judge's mean calibrated by human labels
(``--human``) as ``<key>.calibrated``, ``<key>.calibrated_ci95_low`` and
``<key>.calibrated_ci95_high``; against a baseline, ``<key>.baseline``, ``<key>.delta`` and
``<key>.p_value``.

Two names that would share a key are refused before anything is scored
(:func:`metric_keys`), so a key always stands for one metric; so is a name whose key, or a key
written beside it (``<key>.ci95_high``, the param ``signature.<key>``), would pass MLflow's
limit of 250 characters.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from rageval.core.errors import UsageError

__all__ = ["CALIBRATION_SUFFIXES", "CI_SUFFIXES", "COMPARISON_SUFFIXES", "MAX_KEY_CHARS",
           "SIGNATURE_PREFIX", "metric_key", "metric_keys"]

CI_SUFFIXES = ("ci95_low", "ci95_high")
COMPARISON_SUFFIXES = ("baseline", "delta", "p_value")
CALIBRATION_SUFFIXES = ("calibrated", "calibrated_ci95_low", "calibrated_ci95_high")

_REFUSED = re.compile(r"[^\w.\- /]", re.ASCII)
_UNDERSCORES = re.compile(r"_+")
_AROUND_SLASH = re.compile(r"_*/_*")
# MLflow's limit on a metric's or a param's key, and the longest key a metric's key is
# written in: its CI's upper end, or its signature's param.
MAX_KEY_CHARS = 250
SIGNATURE_PREFIX = "signature."
_LONGEST_AROUND = max(len(SIGNATURE_PREFIX),
                      *(len(s) + 1 for s in (*CI_SUFFIXES, *COMPARISON_SUFFIXES,
                                                 *CALIBRATION_SUFFIXES)))


def metric_key(name: str) -> str:
    """``name`` as an MLflow metric key (the rules of this module's docstring)."""
    key = _REFUSED.sub("_", name.replace("@", "_at_").replace(":", "/"))
    key = _AROUND_SLASH.sub("/", _UNDERSCORES.sub("_", key)).strip("_")
    if not key or key != posixpath.normpath(key) or key.startswith(("/", ".")):
        raise UsageError(f"metric {name!r} has no MLflow key: it maps to {key!r}, which MLflow "
                         "would read as a path")
    if len(key) + _LONGEST_AROUND > MAX_KEY_CHARS:
        raise UsageError(f"metric {name!r} has no MLflow key: its key has {len(key)} "
                         f"characters, and with the suffixes written beside it MLflow takes "
                         f"{MAX_KEY_CHARS - _LONGEST_AROUND} at most")
    return key


def metric_keys(names: Iterable[str]) -> dict[str, str]:
    """Each name's key, in the order given; a :class:`UsageError` names any two names that
    would share one, with each other's suffixed keys counted too (``a.delta`` against the
    delta of ``a``)."""
    keys: dict[str, str] = {}
    owner: dict[str, str] = {}
    for name in names:
        if name in keys:
            continue
        key = metric_key(name)
        keys[name] = key
        for written in (key, *(f"{key}.{s}" for s in (*CI_SUFFIXES, *COMPARISON_SUFFIXES,
                                                 *CALIBRATION_SUFFIXES))):
            other = owner.setdefault(written, name)
            if other != name:
                raise UsageError(f"metrics {other!r} and {name!r} would both be logged to "
                                 f"MLflow as {written!r}: score them in separate runs")
    return keys
