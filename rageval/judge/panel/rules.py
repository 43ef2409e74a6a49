"""How a panel's members' values make the panel's value, one item at a time.

A member *abstains* on an item when it gives no value: a reply that cannot be read, a request
that failed, a record its rubric cannot be shown. Abstentions are counted and reported, never
scored as 0, and no rule depends on the order of the members:

* ``mean`` and ``median``: of the members that gave a value; an item every member abstained on
  is unscored.
* ``majority`` (binary verdicts, a 0-1 rubric): a value wins when more than half of *all* the
  members give it, abstentions included in the count, so that an abstaining member can neither
  shrink the denominator nor break a tie; without such a value the item is unscored.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["aggregate"]


def aggregate(values: np.ndarray, rule: str) -> tuple[float, str | None]:
    """The panel's value of one item from its members' (NaN: abstained), and why there is
    none when there is none."""
    given = values[~np.isnan(values)]
    if not len(given):
        return math.nan, "every member of the panel abstained"
    if rule == "mean":
        return float(given.mean()), None
    if rule == "median":
        return float(np.median(given)), None
    votes = np.floor(given + 0.5)  # a verdict averaged over samples, rounded half up
    members = len(values)
    for verdict in (1.0, 0.0):
        if (votes == verdict).sum() * 2 > members:
            return verdict, None
    yes, no = int((votes == 1).sum()), int((votes == 0).sum())
    return math.nan, (f"no strict majority: {yes} of {members} members for, {no} against, "
                      f"{members - yes - no} abstained")
