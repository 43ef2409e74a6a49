"""The compiled proof that a slice of a run holds six fields a line, held to its definition.

``rageval.retrieval.trec._six_fields`` answers, for whole lines of a run, whether each is six
non-empty fields split by single spaces, all ASCII, with no other whitespace than the line
ends; and where so, the slice's blocks of one topic. Both of its versions (64 bytes at a time,
and the byte-by-byte one that processors without SSE2 run) must give what the definition below
gives, and a slice read through the proof must read as the same slice read without it.

Built at install where a C compiler is found: without it these tests skip, with the reason
(with ``CI=true`` they fail instead, since CI builds it).
"""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rageval.retrieval.trec import fast_read
from rageval.retrieval.trec.fast_read import SliceFacts, run_slice, slice_byte_facts
from rageval.retrieval.trec_eval.evaluation import Options, run_evaluation
from rageval.retrieval.trec_eval.output import write_results

try:
    from rageval.retrieval.trec._six_fields import six_field_blocks, six_field_blocks_bytewise
except ImportError:  # pragma: no cover - depends on the install
    message = ("rageval.retrieval.trec._six_fields is not built (no C compiler at install): "
               "pip install -e . with one")
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

PROOFS = [six_field_blocks, six_field_blocks_bytewise]
LINES_A_BLOCK, FEW_BLOCKS = 16, 1024


def defined(data: bytes) -> tuple[int, list[str], list[int]] | None:
    """The proof's definition, line by line."""
    if not data:
        return None
    lines = (data[:-1] if data.endswith(b"\n") else data).split(b"\n")
    for line in lines:
        fields = line.split(b" ")
        if (len(fields) != 6 or b"" in fields or not line.isascii()
                or any(byte in line for byte in b"\t\r\x0b\x0c")):
            return None
    topics: list[str] = []
    starts: list[int] = []
    for number, line in enumerate(lines):
        topic = line.split(b" ")[0].decode()
        if not topics or topics[-1] != topic:
            topics.append(topic)
            starts.append(number)
    if len(topics) * LINES_A_BLOCK > len(lines) + LINES_A_BLOCK * FEW_BLOCKS:
        return None  # topics interleaved: the Python checks decide
    return len(lines), topics, starts


# Fields from a few bytes that matter: the separator's neighbours, non-ASCII, other whitespace.
FIELD = st.text(alphabet="ab1.#\t\r\x0b\x0cé", min_size=0, max_size=4)
SEPARATOR = st.sampled_from([" ", " ", " ", " ", "  ", "\t"])


@st.composite
def slices(draw: st.DrawFn) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        fields = draw(st.lists(FIELD, min_size=5, max_size=7))
        text = fields[0]
        for field in fields[1:]:
            text += draw(SEPARATOR) + field
        lines.append(text)
    text = "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n", " \n"]))
    return text.encode()


@st.composite
def well_formed_slices(draw: st.DrawFn) -> bytes:
    """Six-field lines of varied lengths (line ends at every place in a 64-byte block), with
    topics in blocks, and now and then one byte changed."""
    field = st.text(alphabet="abcxyz0123456789.-", min_size=1, max_size=9)
    # Topics of up to seven bytes are compared a word at a time, longer ones byte by byte.
    topic = st.sampled_from(["1", "2", "10", "q1", "301", "1234567", "12345678", "123456789",
                             "topic-0001", "topic-00012"])
    lines = [" ".join([draw(topic), *draw(st.lists(field, min_size=5, max_size=5))])
             for _ in range(draw(st.integers(1, 40)))]
    data = bytearray(("\n".join(lines) + draw(st.sampled_from(["", "\n"]))).encode())
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.sampled_from(b" \n\t\rx\x80"))
    return bytes(data)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(slices(), well_formed_slices()))
def test_both_proofs_are_the_definition(data: bytes) -> None:
    expected = defined(data)
    for proof in PROOFS:
        assert proof(data) == expected


@pytest.mark.parametrize("proof", PROOFS)
def test_line_ends_at_every_place_of_a_block(proof) -> None:
    """Lines of every length from the shortest to past two blocks, topics changing."""
    for length in range(11, 140):
        line = "t Q0 d 1 " + "5" * (length - 11) + "0 r"
        lines = [line.replace("t", f"t{i // 3}", 1) for i in range(7)]
        for data in ("\n".join(lines).encode(), ("\n".join(lines) + "\n").encode()):
            assert proof(data) == defined(data)
            assert proof(data) is not None


@pytest.mark.parametrize("proof", PROOFS)
@pytest.mark.parametrize("at", [0, 1, 62, 63, 64, 65, 127, 128, 4095, 4096])
def test_a_refusing_byte_is_seen_wherever_it_is(proof, at: int) -> None:
    plain = b"1 Q0 d 1 2.5 r\n" * 400
    assert proof(plain) == (400, ["1"], [0])
    for byte in b"\t\r\x0b\x0c\x80\xff":
        changed = bytearray(plain)
        changed[at] = byte
        assert proof(bytes(changed)) is None


@pytest.mark.parametrize("proof", PROOFS)
def test_interleaved_topics_are_left_to_the_python_checks(proof) -> None:
    lines = 2 * LINES_A_BLOCK * FEW_BLOCKS
    data = b"".join(b"%d Q0 d 1 2.5 r\n" % (i % 2) for i in range(lines))
    assert proof(data) is None
    blocks = b"".join(b"%d Q0 d 1 2.5 r\n" % (i // LINES_A_BLOCK) for i in range(lines))
    assert proof(blocks) == defined(blocks) is not None


@pytest.mark.parametrize("proof", PROOFS)
@pytest.mark.parametrize("final_end", [b"\n", b""])
def test_the_bound_on_blocks_holds_at_its_edge(proof, final_end: bytes) -> None:
    """A block a line, in the shortest lines: 1092 lines are within the bound, 1093 not; and
    2048 blocks in 16384 lines are, in one line fewer not."""
    for lines, proven in ((1092, True), (1093, False)):
        data = b"\n".join(b"ab"[i % 2:i % 2 + 1] + b" b c d e f" for i in range(lines))
        assert (proof(data + final_end) is not None) is proven
    for lines, proven in ((16384, True), (16383, False)):
        topics = [*range(2047), *[2047] * (lines - 2047)]
        data = b"\n".join(b"%d Q0 d 1 2 r" % topic for topic in topics) + final_end
        assert proof(data) == defined(data)
        assert (proof(data) is not None) is proven


def test_the_proof_takes_any_buffer_and_refuses_text() -> None:
    line = b"1 Q0 d 1 2.5 r\n"
    assert six_field_blocks(bytearray(line)) == six_field_blocks(memoryview(line)) == (
        1, ["1"], [0])
    with pytest.raises(TypeError):
        six_field_blocks("1 Q0 d 1 2.5 r\n")  # type: ignore[arg-type]


def render_whole(qrels: Path, run: Path, opts: Options) -> str:
    """The output of the whole-file read (no slices)."""
    whole = replace(opts, chunk_bytes=0)
    qids, results = run_evaluation(str(qrels), str(run), ["all_trec"], whole)
    out = io.StringIO()
    write_results(qids, results, whole, out)
    return out.getvalue()


def rows(parsed: tuple[pl.DataFrame, str] | None) -> object:
    if parsed is None:
        return None
    frame, runid = parsed
    cast = frame.select(pl.col("qid").cast(pl.String), "docno", "score")
    return cast.rows(), runid


@st.composite
def runs(draw: st.DrawFn) -> bytes:
    """Six-field run lines whose scores are numbers, or spellings some reader refuses."""
    score = st.one_of(st.floats(allow_nan=False, allow_infinity=False).map(repr),
                      st.sampled_from(["nan", "inf", "-inf", "0x1p3", "2.5x", "1e400", "+.5",
                                       "1e5", "-0", "00.250"]))
    topic = st.sampled_from(["1", "2", "10", "#c", "q01"])
    lines = [f"{draw(topic)} Q0 d{i} {i} {draw(score)} {draw(st.sampled_from(['r', 'run2']))}"
             for i in range(draw(st.integers(1, 30)))]
    return ("\n".join(lines) + draw(st.sampled_from(["", "\n"]))).encode()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_a_proven_slice_reads_as_it_reads_without_the_proof(data: bytes) -> None:
    facts = slice_byte_facts(data, " ")
    assert facts.six_fields == defined(data)
    without = run_slice(data, " ", SliceFacts(facts.odd, facts.doubled, None))
    assert rows(run_slice(data, " ", facts)) == rows(without)


QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n10 0 d1 1\n10 0 dé 2\n"
RUN = "".join(f"{topic} Q0 d{doc} {doc} {10 - doc}.5 run\n" for topic in ("1", "10", "2")
              for doc in range(1, 6))


@pytest.mark.parametrize("run_text", [
    RUN,
    # slices the proof refuses and polars reads, beside proven ones: their topic columns meet
    # where a topic goes on from one slice to the next
    RUN.replace("10 Q0 d3", "10 Q0 dé"),  # not ASCII
    RUN.replace("10 Q0 d2 2 8.5 run", "10 Q0 d2 2 8.5 run extra"),  # a seventh field
])
@pytest.mark.parametrize("chunk", [1, 40, 200, 1 << 20])
def test_trec_eval_gives_the_same_output_with_and_without_the_proof(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_text: str, chunk: int) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text(QRELS)
    run.write_text(run_text)
    opts = replace(Options(query_flag=True), chunk_bytes=chunk)

    def output() -> str:
        qids, results = run_evaluation(str(qrels), str(run), ["all_trec"], opts)
        out = io.StringIO()
        write_results(qids, results, opts, out)
        return out.getvalue()

    proven = output()
    monkeypatch.setattr(fast_read, "six_field_blocks", None)
    assert output() == proven
    assert output() == render_whole(qrels, run, opts)
    assert "runid                 \tall\trun\n" in proven
