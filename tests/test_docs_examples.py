"""Every shell and Python example of the README and of docs/ runs, offline.

A page's examples run in order, in a temporary directory holding a copy of ``fixtures/`` (so
that ``fixtures/demo/records.jsonl`` reads as written and ``out/...`` lands there): a
``python`` block is executed (the blocks of a page share one namespace), and every command of
a ``bash``, ``sh``, ``shell`` or ``console`` block must be a ``rageval`` command, run in-process
through ``rageval.cli.main``, exiting with 0 or with the status an ``<!-- exit: N -->``
comment right before the block names. A block that must not run carries
``<!-- example: not run (REASON) -->`` or ``<!-- example: needs REASON -->`` right before it;
nothing else is skipped.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from rageval.cli import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "shell", "console")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
MARK = re.compile(r"<!--\s*(?P<kind>example|exit):\s*(?P<text>.*?)\s*-->")
REASON = re.compile(r"^(?:not run \((?P<why>[^()]*\S[^()]*)\)|needs (?P<need>\S.*))$")
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page, with the marks written right before it."""

    page: str
    line: int
    lang: str
    body: str
    marks: tuple[tuple[str, str], ...]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def mark(self, kind: str) -> str | None:
        return next((text for k, text in self.marks if k == kind), None)


def blocks(path: Path) -> list[Block]:
    """The page's fenced blocks; marks are the HTML comments between the block and the text
    before it (blank lines allowed)."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(ROOT).as_posix()
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").split("\n")
        marks: list[tuple[str, str]] = []
        while before and (MARK.fullmatch(before[-1].strip()) or not before[-1].strip()):
            found = MARK.fullmatch(before.pop().strip())
            if found:
                marks.insert(0, (found["kind"], found["text"]))
        out.append(Block(name, text.count("\n", 0, match.start()) + 1, match["lang"],
                         match["body"], tuple(marks)))
    return out


def examples(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.lang in SHELL or b.lang == "python"]


def commands(block: Block) -> list[list[str]]:
    """The block's commands as argument lists (``&&`` and ``;`` split them; continuation
    lines joined; ``console`` blocks: the lines after ``$ ``)."""
    lines = block.body.splitlines()
    if block.lang == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    out: list[list[str]] = []
    for line in text.splitlines():
        current: list[str] = []
        for token in shlex.split(line, comments=True):
            if token in ("&&", ";"):
                out.append(current)
                current = []
            else:
                current.append(token)
        out.append(current)
    return [argv for argv in out if argv]


def run_command(argv: list[str], block: Block, monkeypatch: pytest.MonkeyPatch) -> None:
    while argv and ENV.match(argv[0]):
        key, _, value = argv.pop(0).partition("=")
        monkeypatch.setenv(key, value)
    assert argv and argv[0] == "rageval", (
        f"{block.where}: `{shlex.join(argv)}` is not a rageval command: mark the block "
        "<!-- example: not run (REASON) --> if it must not run here")
    target = None
    if ">" in argv:
        at = argv.index(">")
        argv, target = argv[:at], argv[at + 1]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        status = main(argv[1:], stdout=out)
    expected = int(block.mark("exit") or 0)
    assert status == expected, (
        f"{block.where}: `{shlex.join(argv)}` exited with {status}, not {expected}\n"
        f"{err.getvalue()[-3000:]}")
    if target is not None:
        Path(target).write_text(out.getvalue(), encoding="utf-8")


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_the_examples_of_the_page_run(page: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGEVAL_EMBEDDING_CACHE", str(tmp_path / "embeddings"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    for block in examples(page):
        if block.mark("example") is not None:
            continue
        if block.lang == "python":
            code = compile(block.body, block.where, "exec")
            with contextlib.redirect_stdout(io.StringIO()):
                exec(code, namespace)
            continue
        for argv in commands(block):
            run_command(argv, block, monkeypatch)


def test_every_example_left_out_says_why() -> None:
    unmarked_kinds = []
    for page in PAGES:
        for block in blocks(page):
            for kind, text in block.marks:
                if kind == "example":
                    assert REASON.match(text), (
                        f"{block.where}: '<!-- example: {text} -->' gives no reason: write "
                        "'not run (REASON)' or 'needs REASON'")
                elif kind == "exit":
                    assert text.isdigit() and int(text) != 0, (
                        f"{block.where}: '<!-- exit: {text} -->' names no non-zero status")
                if block.lang not in SHELL and block.lang != "python":
                    unmarked_kinds.append(f"{block.where} ({block.lang or 'no language'})")
    assert not unmarked_kinds, f"marks on blocks that are not examples: {unmarked_kinds}"


def test_the_examples_are_found() -> None:
    """The collector sees the blocks it must run: the README's commands among them."""
    readme = examples(ROOT / "README.md")
    assert [b.lang for b in readme[:2]] == ["bash", "bash"]
    assert all(b.mark("example") for b in readme[:2])  # installs packages: tests/test_readme.py
    ran = [b for page in PAGES for b in examples(page) if b.mark("example") is None]
    assert sum(b.lang == "python" for b in ran) >= 5 and sum(b.lang in SHELL for b in ran) >= 20
    assert commands(Block("x", 1, "bash", 'rageval score a.jsonl -m "p(rel=2)@5" \\\n'
                          "    --out out/a && rageval fuse a b > c.run  # note\n", ())) == [
        ["rageval", "score", "a.jsonl", "-m", "p(rel=2)@5", "--out", "out/a"],
        ["rageval", "fuse", "a", "b", ">", "c.run"]]
