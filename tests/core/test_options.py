"""Each option declared once: the flags, the defaults, the evaluation-file fields and the
judge's configuration are built from the declarations (rageval.core.options)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from rageval.cli.parser import build_parser
from rageval.cli.score_options import DEFAULTS
from rageval.config.schema import BY_PATH, SCORE_OPTIONS
from rageval.core.errors import UsageError
from rageval.core.options import Option, add_options, declare, defaults, options_of
from rageval.judge.llm.config import JUDGE_OPTIONS, JudgeConfig
from rageval.judge.llm.options import JudgeOptions


@dataclasses.dataclass(frozen=True)
class _Toy:
    size: int = dataclasses.field(default=3, metadata=declare(
        flags=("--toy-size",), type=int, kind="int", help="how big"))
    loud: bool = dataclasses.field(default=False, metadata=declare(
        flags=("--loud",), switch=True, kind="bool"))
    tags: tuple[str, ...] = dataclasses.field(default=(), metadata=declare(
        flags=("--tag",), append=True))
    hidden: int = 0


def test_a_dataclass_declares_its_options_on_its_fields() -> None:
    options = options_of(_Toy, "toy")
    assert [o.dest for o in options] == ["size", "loud", "tags"]  # undeclared fields left out
    assert defaults(options) == {"size": 3, "loud": False}  # an empty tuple: nothing given
    assert options[0].file is not None and (options[0].file.table, options[0].file.key,
                                            options[0].file.kind) == ("toy", "size", "int")
    assert options[2].file is None
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    parser.set_defaults(**defaults(options))
    args = parser.parse_args(["--toy-size", "5", "--no-loud", "--tag", "a", "--tag", "b"])
    assert (args.size, args.loud, args.tags) == (5, False, ["a", "b"])


def test_every_option_is_declared_once() -> None:
    dests = [o.dest for o in SCORE_OPTIONS]
    assert len(dests) == len(set(dests))
    flags = [flag for o in SCORE_OPTIONS for flag in o.flags]
    assert len(flags) == len(set(flags))
    assert all(isinstance(o, Option) for o in JUDGE_OPTIONS)


def test_every_judge_field_but_the_dry_run_is_a_key_of_the_judge_table() -> None:
    for option in JUDGE_OPTIONS:
        if option.field == "dry_run":
            assert option.file is None
            continue
        assert BY_PATH[("judge", option.field)].dest == option.dest


def test_the_defaults_are_the_configurations_own() -> None:
    config = JudgeConfig()
    for option in JUDGE_OPTIONS:
        value = getattr(config, option.field)
        if isinstance(value, str | int | float | bool):
            assert DEFAULTS[option.dest] == value, option.dest
    assert DEFAULTS["judge_timeout"] == JudgeConfig().timeout == 120.0


def test_the_command_line_builds_the_judge_configuration_from_the_declarations() -> None:
    args = build_parser().parse_args([
        "score", "r.jsonl", "-m", "judge:faithfulness", "--judge-model", "m",
        "--judge-first-reply-timeout", "9", "--judge-extra", "top_k=1",
        "--judge", "model=a", "--judge", "model=b", "--judge-panel-rule", "median",
        "--no-offline", "--judge-samples", "2"])
    judge = JudgeOptions(**JudgeOptions.given(vars(args)))
    assert judge == JudgeOptions(model="m", first_reply_timeout=9.0, extra={"top_k": 1},
                                 panel=({"model": "a"}, {"model": "b"}),
                                 panel_rule="median", samples=2)
    judge.check()


@pytest.mark.parametrize(("field", "value", "message"), [
    ("first_reply_timeout", 0.0, "--judge-first-reply-timeout must be a positive number"),
    ("timeout", float("nan"), "--judge-timeout must be a positive number"),
    ("concurrency", 0, "judge concurrency must be an integer of at least 1"),
    ("response_format", "yaml", "--judge-response-format must be one of"),
    ("price_in", -1.0, "--judge-price-in must be a non-negative price"),
])
def test_each_declared_check_runs(field: str, value: object, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        JudgeConfig(model="m", **{field: value}).check()  # type: ignore[arg-type]
