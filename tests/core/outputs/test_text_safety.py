"""The text-safety layer, channel by channel, on the hostile corpus: nothing it holds becomes
a command for a CI runner, an invalid XML character, HTML or a mention in Markdown."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest
from github_runner import runner_commands
from hostile import CORPUS, HOSTILE, live_mentions, raw_html_tags
from markdown_it import MarkdownIt
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rageval.core.outputs.masking import Masker, basic_token, url_secrets
from rageval.core.outputs.text import (
    markdown,
    markdown_code,
    terminal,
    terminal_lines,
    valid_unicode,
    workflow_command,
    xml_text,
)

MARKDOWN_TAGS = frozenset({"p", "table", "thead", "tbody", "tr", "th", "td", "code", "h3",
                           "ul", "li"})


@pytest.mark.parametrize("text", CORPUS)
def test_terminal_text_holds_no_control_character_and_no_command(text: str) -> None:
    safe = terminal(text)
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 or 0xd800 <= ord(c) < 0xe000
                   for c in safe)
    assert "\u2028" not in safe and "\u202e" not in safe
    assert "::" not in safe and "##[" not in safe
    assert runner_commands(safe) == []


def test_terminal_shows_what_it_escapes() -> None:
    assert terminal("a\x1b[2J\nb\x01") == "a\\x1b[2J\\nb\\x01"
    assert terminal("lone \ud800") == "lone \\ud800"
    assert terminal("judge:faithfulness") == "judge:faithfulness"  # one colon is left alone
    assert terminal_lines("first\n::error::x") == "first\n:\u2060:error:\u2060:x"


@pytest.mark.parametrize("width", [20, 33, 47, 80, 160])
def test_no_wrapping_of_a_table_or_a_message_starts_a_command(width: int) -> None:
    """Rich wraps and folds cells and long lines at the console width: wherever it breaks
    the text, no line of the output is a command."""
    out = io.StringIO()
    console = Console(file=out, width=width, no_color=True)
    table = Table(title=Text(terminal(HOSTILE)))
    table.add_column("id", overflow="fold")
    table.add_column("reason")
    for text in CORPUS:
        table.add_row(Text(terminal(text)), Text(terminal("x " * 7 + text)))
        console.print(terminal("unscored: " + text), markup=False, highlight=False)
    console.print(table)
    assert runner_commands(out.getvalue()) == []
    assert "\x1b" not in out.getvalue()


def test_the_runner_sees_rageval_commands_and_honours_stop_commands() -> None:
    """The simulated runner itself: what it reads, and the guard it honours."""
    log = "::error title=t::a\n  ::warning::b\nx ##[debug]c\n::stop-commands::T\n::error::no\n" \
          "::T::\n::notice::yes"
    assert [name for name, _ in runner_commands(log)] == ["error", "warning", "debug",
                                                          "stop-commands", "notice"]


@pytest.mark.parametrize("text", CORPUS)
def test_xml_text_parses_with_elementtree_and_junitparser(text: str, tmp_path) -> None:
    from junitparser import JUnitXml

    suite = ET.Element("testsuite", name=xml_text(text))
    case = ET.SubElement(suite, "testcase", name=xml_text(text), classname="c")
    ET.SubElement(case, "failure", message=xml_text(text)).text = xml_text(text)
    data = ET.tostring(ET.Element("testsuites"), "unicode")
    root = ET.Element("testsuites")
    root.append(suite)
    data = ET.tostring(root, "unicode")
    path = tmp_path / "j.xml"
    path.write_bytes(data.encode("utf-8"))
    assert ET.parse(path).getroot().find("testsuite") is not None
    assert len(list(JUnitXml.fromfile(str(path)))) == 1


def test_xml_text_shows_forbidden_characters() -> None:
    assert xml_text("a\x01b\ud800\uffff\tc\n") == "a\\x01b\\ud800\\uffff\tc\n"


@pytest.mark.parametrize("text", CORPUS)
def test_markdown_holds_no_html_no_mention_and_one_row(text: str) -> None:
    table = ("| metric | reason |\n| --- | --- |\n"
             f"| {markdown_code(text)} | {markdown(text)} |\n")
    rendered = MarkdownIt("commonmark").enable("table").render(table)
    assert raw_html_tags(rendered, MARKDOWN_TAGS) == []
    assert live_mentions(rendered) == []
    assert rendered.count("<tr>") == 2  # the header and one row: no cell broke its row


def test_markdown_keeps_the_text_readable() -> None:
    rendered = MarkdownIt("commonmark").render(markdown("a <b> @x #1 *y*"))
    assert rendered == "<p>a &lt;b&gt; @\u2060x #\u20601 *y*</p>\n"


def test_markdown_defuses_gh_references() -> None:
    """GitHub links ``GH-123`` to an issue as it links ``#123``; ``ABGH-1`` is no reference."""
    assert markdown("see GH-12 and gh-3") == "see GH-\u206012 and gh-\u20603"
    assert markdown("ABGH-1") == "ABGH-1"


def test_workflow_commands_escape_their_data_and_properties() -> None:
    line = workflow_command("error", "100% sure\r\n::add-mask::x \x1b", title="a:b,c")
    assert line == "::error title=a%3Ab%2Cc::100%25 sure%0D%0A::add-mask::x \\x1b"
    assert [name for name, _ in runner_commands(line)] == ["error"]


def test_valid_unicode_replaces_lone_surrogates() -> None:
    assert valid_unicode("a\ud800b") == "a\ufffdb"
    valid_unicode(HOSTILE).encode("utf-8")


def test_a_masker_masks_every_form_of_a_url_s_credentials() -> None:
    masker = Masker.of(url_secrets("http://user:SECRET%2FPW9@host:8000/v1?api-key=QKEY123"))
    token = basic_token("user", "SECRET/PW9")
    echoed = f"Basic {token} SECRET%2FPW9 SECRET/PW9 api-key=QKEY123"
    assert masker(echoed) == "Basic *** *** *** api-key=***"
    assert "SECRET" not in repr(masker)
    assert masker("user") == "user"  # a user name beside a password is no secret


def test_a_user_name_alone_in_a_url_is_a_token_and_masked() -> None:
    masker = Masker.of(url_secrets("https://ghp_TOKEN123@host/v1"))
    assert masker("echoed ghp_TOKEN123 and Basic " + basic_token("ghp_TOKEN123", "")) == (
        "echoed *** and Basic ***")


def test_a_masker_leaves_short_values_and_masks_the_longest_first() -> None:
    masker = Masker.of(["abc", "sk-key", "sk-key-long", None, ""])
    assert masker("abc sk-key-long sk-key") == "abc *** ***"


def test_the_judge_endpoint_redacts_the_basic_form_at_the_source() -> None:
    from rageval.judge.llm.transport.endpoint import Endpoint

    endpoint = Endpoint.of("http://user:SECRETPW9@127.0.0.1:8000/v1")
    echoed = f"Unauthorized: Authorization: Basic {basic_token('user', 'SECRETPW9')}"
    assert endpoint.redact(echoed) == "Unauthorized: Authorization: Basic ***"
