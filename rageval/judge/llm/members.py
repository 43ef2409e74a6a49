"""The members of a judge panel (``--judge SPEC``, repeatable): each a judge of its own, given
by what it changes of the run's judge options: ``name``, ``model``, ``base_url``,
``api_key_env``, ``prompts_dir`` (the member's own rubric files), ``seed``, ``temperature``.

A spec is ``key=value`` pairs joined by commas: ``model=gpt-4o-mini`` or
``name=local,model=smollm2-135m-instruct,base_url=http://127.0.0.1:8011/v1``. A member's name
defaults to its model, with its seed when two members share a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from rageval.core.errors import UsageError, check_int, did_you_mean

__all__ = ["MEMBER_KEYS", "PANEL_RULES", "check_panel", "member_names", "panel_members",
           "parse_member"]

#: What a member may change, and how its value is read.
MEMBER_KEYS: dict[str, type] = {"name": str, "model": str, "base_url": str, "api_key_env": str,
                                "prompts_dir": str, "seed": int, "temperature": float}
#: How a panel's members' values make its value.
PANEL_RULES = ("mean", "median", "majority")


def parse_member(spec: str) -> dict[str, Any]:
    """A ``--judge`` spec as the options it changes; a usage error names what is wrong."""
    if not isinstance(spec, str) or not spec.strip():
        raise UsageError(f"--judge {spec!r}: expected KEY=VALUE pairs, e.g. model=gpt-4o-mini")
    out: dict[str, Any] = {}
    for item in spec.split(","):
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not key or not raw:
            raise UsageError(f"--judge {spec!r}: {item.strip()!r} is not KEY=VALUE")
        if key not in MEMBER_KEYS:
            hint = did_you_mean(key, MEMBER_KEYS)
            raise UsageError(f"--judge {spec!r}: unknown key {key!r}"
                             f"{f' ({hint})' if hint else ''}; the keys are "
                             f"{', '.join(MEMBER_KEYS)}")
        if key in out:
            raise UsageError(f"--judge {spec!r}: {key} is given twice")
        out[key] = _value(spec, key, raw)
    return out


def member_names(members: Iterable[Mapping[str, Any]], default_model: str | None) -> list[str]:
    """Each member's name: its own, else its model (and its seed, where models repeat)."""
    members = list(members)
    models = [m.get("model", default_model) for m in members]
    names = []
    for member, model in zip(members, models, strict=True):
        if "name" in member:
            names.append(str(member["name"]))
        elif models.count(model) > 1 and "seed" in member:
            names.append(f"{model}#seed{member['seed']}")
        else:
            names.append(str(model))
    return names


def panel_members(judge: Any) -> list[tuple[str, Any]]:
    """The members of ``judge``'s panel (a :class:`JudgeOptions`) by name, each with the
    options it judges with."""
    names = member_names(judge.panel, judge.model)
    return [(name, replace(judge, panel=(), panel_min_members=None,
                           **{k: v for k, v in member.items() if k != "name"}))
            for name, member in zip(names, judge.panel, strict=True)]


def check_panel(judge: Any) -> None:
    """A usage error for a panel that does not hold together (``judge``: its options)."""
    least = judge.panel_min_members
    if least is not None and not judge.panel:
        raise UsageError("--panel-min-members applies to a judge panel (--judge SPEC, twice or "
                         "more); a single judge that answers nothing always stops the run")
    if not judge.panel:
        return
    if judge.panel_rule not in PANEL_RULES:
        raise UsageError(f"the panel rule must be one of {', '.join(PANEL_RULES)}, got "
                         f"{judge.panel_rule!r}")
    if len(judge.panel) < 2:
        raise UsageError("a panel needs at least two judges (--judge SPEC, twice or more)")
    if least is not None:
        check_int("--panel-min-members", least, 1)
        if least > len(judge.panel):
            raise UsageError(f"--panel-min-members {least}: the panel has only "
                             f"{len(judge.panel)} members")
    for member in judge.panel:
        unknown = sorted(set(member) - set(MEMBER_KEYS))
        if unknown:
            raise UsageError(f"panel member {dict(member)!r}: unknown key {unknown[0]!r}")
    names = member_names(judge.panel, judge.model)
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"two panel members are both named {twice[0]!r}: give each a name "
                         "(name=...), or a seed when they share a model")
    members = panel_members(judge)
    asked: dict[tuple[Any, ...], str] = {}
    for name, member in members:
        member.check()
        # What a cache key holds: two members alike in all of it share every cached reply.
        how = (member.model, member.seed, member.temperature, member.prompts_dir)
        if how in asked:
            raise UsageError(f"panel members {asked[how]!r} and {name!r} ask the same model "
                             "with the same seed, temperature and rubric files: they would "
                             "share every cached reply (the cache does not tell endpoints "
                             "apart); give them different seeds or models")
        asked[how] = name


def _value(spec: str, key: str, raw: str) -> Any:
    kind = MEMBER_KEYS[key]
    if kind is str:
        return raw
    try:
        value = kind(raw)
    except ValueError:
        raise UsageError(f"--judge {spec!r}: {key}={raw} is not a valid "
                         f"{kind.__name__}") from None
    return value
