"""docs/commands.md and the README's first two commands, held to the command line itself.

For every subcommand of ``rageval`` (read from its argparse parser; ``trec-eval`` from its own
help and long options), every option appears in docs/commands.md under that command's heading,
and every option the page names for a command exists. The README's demo command must parse as
written, and its test command is the command CI runs (tests/test_readme.py checks that the one
is contained in the other; here each of its steps is checked to exist).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from rageval.cli import trec_eval_command
from rageval.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "commands.md"
HEADING = re.compile(r"^(?P<level>#+) +`rageval (?P<command>[a-z][\w-]*(?: [a-z][\w-]*)?)`\s*$",
                     re.M)
ANY_HEADING = re.compile(r"^(?P<level>#+) ", re.M)
SPAN = re.compile(r"`([^`\n]+)`")
OPTION = re.compile(r"^(?:--[A-Za-z][\w-]*|-[A-Za-z])$")
HELP = {"-h", "--help"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions if action.help is not argparse.SUPPRESS
            for option in action.option_strings} - HELP


def _trec_eval_options() -> set[str]:
    """What ``rageval trec-eval --help`` lists, and the long forms it takes (trec_eval's)."""
    listed = re.findall(r"^  (-[A-Za-z])(?:, (--[A-Za-z_]+))?", trec_eval_command.HELP, re.M)
    options = {option for pair in listed for option in pair if option}
    return options | {"--" + name.rstrip("=") for name in trec_eval_command._LONG_OPTS}


def command_options() -> dict[str, set[str]]:
    """Subcommand (``cache stats`` for an action of ``cache``) -> its options."""
    out: dict[str, set[str]] = {}
    for name, parser in _subparsers(build_parser()).items():
        if name == "trec-eval":  # its parser is trec_eval's own getopt
            out[name] = _trec_eval_options()
            continue
        actions = _subparsers(parser)
        for action, sub in actions.items():
            out[f"{name} {action}"] = _options(sub)
        out[name] = _options(parser).union(*(out[f"{name} {a}"] for a in actions))
    return out


def sections() -> dict[str, str]:
    """Command -> the text under its heading, down to the next heading of its level or above."""
    text = PAGE.read_text(encoding="utf-8")
    headings = list(ANY_HEADING.finditer(text))
    out: dict[str, str] = {}
    for match in HEADING.finditer(text):
        level = len(match["level"])
        end = next((h.start() for h in headings
                    if h.start() > match.start() and len(h["level"]) <= level), len(text))
        out[match["command"]] = text[match.end():end]
    return out


def named(section: str, command: str, known: set[str]) -> dict[str, set[str]]:
    """Options the section names, by the command they belong to: code spans starting with an
    option belong to the section's command, and ``rageval CMD ...`` spans to CMD."""
    found: dict[str, set[str]] = {}
    for span in SPAN.findall(section):
        words = span.split()
        owner = command
        if words[0] == "rageval" and len(words) > 1:
            two = " ".join(words[1:3])
            owner = two if two in known else words[1]
        elif not words[0].startswith("-"):
            continue
        for word in words:
            option = word.split("=", 1)[0]
            if OPTION.match(option):
                found.setdefault(owner, set()).add(option)
    return found


def test_every_command_has_its_heading() -> None:
    assert set(sections()) == set(command_options())


@pytest.mark.parametrize("command", sorted(command_options()))
def test_every_option_is_documented_under_its_command(command: str) -> None:
    options = command_options()
    mine = named(sections()[command], command, set(options)).get(command, set())
    missing = options[command] - mine
    assert not missing, f"docs/commands.md, `rageval {command}`: not documented: {sorted(missing)}"


@pytest.mark.parametrize("command", sorted(command_options()))
def test_every_documented_option_exists(command: str) -> None:
    options = command_options()
    for owner, found in named(sections()[command], command, set(options)).items():
        assert owner in options, f"docs/commands.md, `rageval {command}`: no command {owner!r}"
        unknown = found - options[owner] - (HELP if owner == "trec-eval" else set())
        assert not unknown, (f"docs/commands.md, `rageval {command}`: `rageval {owner}` has "
                             f"no option {sorted(unknown)}")


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_the_readme_demo_command_parses_as_written() -> None:
    install, *runs = (part.strip() for part in _readme_commands()[0].split("&&"))
    assert shlex.split(install) == ["pip", "install", "."]
    assert (ROOT / "pyproject.toml").is_file()
    assert runs
    for run in runs:
        argv = shlex.split(run)
        assert argv[0] == "rageval" and argv[1] in _subparsers(build_parser())
        args = build_parser().parse_args(argv[1:])
        assert args.command == "run" and (ROOT / args.eval_file).is_file()


def test_the_readme_test_command_is_the_ci_command_and_its_steps_exist() -> None:
    command = _readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command in ci  # a whole line of .ci/run, not only a part of one
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    for step in command.split("&&"):
        argv = shlex.split(step)
        if argv[:2] == ["python", "-m"]:
            assert importlib.util.find_spec(argv[2]) is not None, argv[2]
        elif argv[:2] == ["pip", "install"]:
            for requirement in argv[2:]:
                wanted = re.fullmatch(r"\.\[(?P<extras>[\w,]+)\]", requirement)
                if wanted:
                    assert set(wanted["extras"].split(",")) <= set(extras), requirement
        else:
            pytest.fail(f"unexpected step in the README's test command: {step.strip()}")
    # The docs extra is in `all`, so that the install above brings what CI's docs build needs.
    assert "docs" in project["optional-dependencies"]["all"][0]
    assert {r.split(">=")[0] for r in extras["docs"]} == {
        "mkdocs", "mkdocs-material", "mkdocstrings[python]"}
    build = next(i for i, line in enumerate(ci) if "mkdocs build --strict" in line)
    assert build > ci.index(command)
