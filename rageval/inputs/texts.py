"""Query and document texts for a run, and BEIR's qrels.

Queries and documents come as JSON Lines (BEIR's ``{"_id", "title", "text"}``; also the
``docid``/``segment`` of the MS MARCO v2.1 segments and pyserini's ``id``/``contents``) or as
TSV (``id<TAB>text``: TREC topics, MS MARCO collections), told apart by the file's first
character. A document with a non-empty title reads ``title + " " + text``.

A corpus may hold millions of documents: polars scans its lines and keeps those whose id the
run retrieves; only these are parsed (exactly, in Python, so errors name the line). When
polars cannot read the file, or a retrieved document is not found, the whole file is parsed
line by line instead, which finds a malformed line wherever it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rageval.core.errors import InputError
from rageval.core.records.lines import text_lines
from rageval.core.records.model import MAX_GRADE
from rageval.inputs.files import check_file, json_cell

__all__ = ["read_beir_qrels", "read_corpus", "read_queries"]

_QUERY_IDS = ("_id", "qid", "id")
_QUERY_TEXTS = ("text", "query")
_DOC_IDS = ("_id", "docid", "id")
_DOC_TEXTS = ("text", "segment", "contents")
_CHUNK = 1 << 16

# One parsed line: (id, text), or None for a blank line.
_Parser = Callable[[str, str, int], "tuple[str, str] | None"]


def _is_jsonl(path: str) -> bool:
    """Whether the file's first non-blank character (after a BOM) is ``{``."""
    check_file(path)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            head = chunk.removeprefix(b"\xef\xbb\xbf").lstrip()
            if head:
                return head.startswith(b"{")
    return False


def _identifier(value: Any, path: str, line: int, field: str) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"expected a non-empty string or an integer, found {value!r}"[:120],
                     path=path, line=line, field=field)


def _json_entry(ids: tuple[str, ...], texts: tuple[str, ...], titled: bool) -> _Parser:
    def parse(text: str, path: str, line: int) -> tuple[str, str] | None:
        if not text.strip():
            return None
        item = json_cell(text, path, line, None)
        if not isinstance(item, dict):
            raise InputError(f"expected a JSON object, found {type(item).__name__}",
                             path=path, line=line)
        id_key = next((key for key in ids if key in item), ids[0])
        text_key = next((key for key in texts if key in item), texts[0])
        for key in (id_key, text_key):
            if key not in item:
                raise InputError(f"missing required field {key!r}", path=path, line=line,
                                 field=key)
        body, title = item[text_key], item.get("title") if titled else None
        if not isinstance(body, str):
            raise InputError(f"expected a string, found {body!r}"[:120], path=path, line=line,
                             field=text_key)
        if title is not None and not isinstance(title, str):
            raise InputError(f"expected a string, found {title!r}"[:120], path=path, line=line,
                             field="title")
        return _identifier(item[id_key], path, line, id_key), f"{title} {body}" if title else body

    return parse


def _tsv_entry(id_name: str) -> _Parser:
    def parse(text: str, path: str, line: int) -> tuple[str, str] | None:
        text = text.rstrip("\r\n")
        if not text.strip():
            return None
        key, tab, body = text.partition("\t")  # the text is everything after the first tab
        if not tab or not key:
            raise InputError(f"expected '{id_name}<TAB>text'", path=path, line=line,
                             field=id_name if tab else None)
        return key, body

    return parse


def _entries(parse: _Parser, path: str, lines: Iterable[tuple[int, str]],
             keep: set[str] | None, what: str) -> dict[str, str]:
    """Parsed entries whose id ``keep`` holds (every entry when ``keep`` is None); an id seen
    twice is an error."""
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    for number, text in lines:
        entry = parse(text, path, number)
        if entry is None or (keep is not None and entry[0] not in keep):
            continue
        if entry[0] in first:
            raise InputError(f"duplicate {what} id {entry[0]!r} (first at line "
                             f"{first[entry[0]]})", path=path, line=number)
        first[entry[0]] = number
        out[entry[0]] = entry[1]
    return out


def _scan_lines(path: str, needed: set[str], jsonl: bool,
                ids: tuple[str, ...]) -> list[tuple[int, str]]:
    """The (line number, line) pairs whose id is in ``needed``, found by polars."""
    import polars as pl

    # \x1f never occurs raw in a JSON line (control characters are escaped there), so every
    # line is one field; a TSV line holding one makes polars fail, and the exact path reads.
    line = pl.col("line").str.strip_chars_start("\ufeff")
    if jsonl:
        key = pl.coalesce([line.str.json_path_match(f"$.{name}") for name in ids])
    else:
        key = line.str.splitn("\t", 2).struct.field("field_0")
    frame = (pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None,
                         schema={"line": pl.String}, comment_prefix=None)
             .with_row_index("n", offset=1)
             .filter(key.is_in(sorted(needed)))
             .select("n", "line")
             .collect())
    return list(zip(frame.get_column("n").to_list(), frame.get_column("line").to_list(),
                    strict=True))


def _read_texts(path: str, needed: set[str], limit: int, what: str) -> dict[str, str]:
    jsonl = _is_jsonl(path)
    ids = _DOC_IDS if what == "document" else _QUERY_IDS
    if jsonl:
        texts = _DOC_TEXTS if what == "document" else _QUERY_TEXTS
        parse = _json_entry(ids, texts, titled=what == "document")
    else:
        parse = _tsv_entry("docid" if what == "document" else "qid")
    try:
        lines = _scan_lines(path, needed, jsonl, ids)
    except Exception:  # polars cannot read it as lines: the exact reader says why
        lines = None
    if lines is not None:
        found = _entries(parse, path, lines, needed, what)
        if needed <= found.keys():
            return found
    return _entries(parse, path, text_lines(path, path, limit), needed, what)


def read_queries(path: str, needed: set[str], limit: int) -> dict[str, str]:
    """Query id -> text for the queries in ``needed`` that the file holds (BEIR
    ``queries.jsonl``, or a ``qid<TAB>text`` TSV such as TREC's topics)."""
    return _read_texts(path, needed, limit, "query")


def read_corpus(path: str, needed: set[str], limit: int) -> dict[str, str]:
    """Doc id -> text for the documents in ``needed`` that the corpus holds."""
    return _read_texts(path, needed, limit, "document")


def _qrels_line(text: str, path: str, number: int) -> tuple[str, str, int] | None:
    if not text.strip():
        return None
    fields = text.rstrip("\r\n").split("\t")
    if len(fields) != 3:
        raise InputError(f"expected 3 tab-separated fields (query-id, corpus-id, score), "
                         f"found {len(fields)}", path=path, line=number)
    for value, name in zip(fields[:2], ("query-id", "corpus-id"), strict=True):
        if not value:
            raise InputError("empty id", path=path, line=number, field=name)
    try:
        grade = int(fields[2])
    except ValueError:
        raise InputError(f"expected an integer score, found {fields[2]!r}", path=path,
                         line=number, field="score") from None
    if abs(grade) > MAX_GRADE:
        raise InputError(f"grade {grade} is outside -{MAX_GRADE}..{MAX_GRADE}", path=path,
                         line=number, field="score")
    return fields[0], fields[1], grade


def _exact_qrels(path: str, limit: int) -> list[tuple[str, str, int]]:
    rows: list[tuple[str, str, int]] = []
    for number, text in text_lines(path, path, limit):
        if number == 1:
            fields = text.rstrip("\r\n").split("\t")
            if len(fields) == 3 and _is_integer(fields[2]):
                raise InputError("expected a header line (query-id<TAB>corpus-id<TAB>score) "
                                 "before the judgments", path=path, line=1)
            continue
        row = _qrels_line(text, path, number)
        if row is not None:
            rows.append(row)
    return rows


def _fast_qrels(path: str) -> list[tuple[str, str, int]] | None:
    """The judgments as polars reads them, or None when anything is off (the exact reader
    then names the line)."""
    import polars as pl

    try:
        frame = pl.read_csv(path, separator="\t", has_header=True, infer_schema=False,
                            quote_char=None)
    except Exception:  # polars raises several unrelated types for bad files
        return None
    if frame.width != 3 or frame.null_count().sum_horizontal().item() > 0:
        return None
    qid, docid, score = frame.get_columns()
    grades = score.str.strip_chars().cast(pl.Int64, strict=False)
    if (_is_integer(score.name)  # no header line: the first judgment became the header
            or grades.null_count() > 0 or bool((grades.abs() > MAX_GRADE).any())):
        return None
    return list(zip(qid.to_list(), docid.to_list(), grades.to_list(), strict=True))


def _is_integer(text: str) -> bool:
    return text.strip().removeprefix("-").isdigit()


def read_beir_qrels(path: str, limit: int) -> dict[str, dict[str, int]]:
    """Query id -> doc id -> grade from a BEIR qrels TSV (a header line, then ``query-id``,
    ``corpus-id`` and ``score`` columns); a later line for the same pair wins, as in BEIR."""
    check_file(path)
    rows = _fast_qrels(path)
    if rows is None:
        rows = _exact_qrels(path, limit)
    if not rows:
        raise InputError("no relevance judgments found", path=path)
    out: dict[str, dict[str, int]] = {}
    for qid, docid, grade in rows:
        out.setdefault(qid, {})[docid] = grade
    return out
