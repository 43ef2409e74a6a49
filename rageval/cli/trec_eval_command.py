"""``rageval trec-eval``: trec_eval 10.0's command line.

Usage::

    rageval trec-eval [-q] [-c] [-n] [-M N] [-l N] [-J] [-N N] [-R FORMAT] [-Z FILE]
                      [-m MEASURE[.PARAMS]]... QRELS RUN

Options and their long forms are trec_eval's; see :data:`HELP`.
"""

from __future__ import annotations

import getopt
import os
import sys
import tempfile
import warnings
from dataclasses import replace
from typing import TextIO

from rageval.core.errors import InputWarning, RagevalError, UsageError
from rageval.core.outputs.text import terminal_lines
from rageval.retrieval.trec.chunked_read import RunSlices
from rageval.retrieval.trec.syntax import WHITESPACE, c_atol
from rageval.retrieval.trec_eval.options import Options, start_slices

# The measures' and the evaluation's modules are imported where they are used, after the run's
# first slices have begun to be read and parsed (see _main): loading them takes about as long.

USAGE = """\
usage: rageval trec-eval [-h] [-v] [-q] [-c] [-n] [-l N] [-M N] [-J] [-N N]
                         [-D LEVEL[.QID]] [-R FORMAT] [-T FORMAT] [-o] [-Z FILE]
                         [-m MEASURE[.PARAMS]]... QRELS RUN
"""

HELP = USAGE + """
Evaluate a TREC run against TREC relevance judgments exactly as trec_eval 10.0 does, with
byte-identical output. RUN may be '-' to read the run from standard input.

options:
  -h, --help            show this help (with -m: also describe those measures) and exit
  -v, --version         print the version and exit
  -q                    also print the values of every topic, before the summary
  -m MEASURE[.PARAMS]   add a measure or a nickname; may be repeated. Parameters follow a
                        '.', comma separated: -m P.5,10  -m ndcg_cut.10  -m relstring.20
                        -m iprec_at_recall.0.5  -m ndcg.1=3,2=7 (grade=gain)  -m rbp.p=0.95
                        Nicknames: official (the default), set, all_trec.
  -c                    average over every topic of the qrels; topics without results count
                        as retrieving nothing (0 for most measures)
  -n                    do not print the summary
  -l N                  minimum grade of a relevant document (default 1)
  -M N                  evaluate only the top N results of each topic
  -J                    drop unjudged documents from the results first (use with care)
  -N N                  number of documents in the collection (for utility's 4th term)
  -D LEVEL[.QID]        evaluate only topic QID (debug output itself is not produced)
  -R FORMAT             relevance format: qrels (default) or qrels_jg, judgments by group
                        ('qid group docno grade'), for -m qrels_jg (map_avgjg, P_avgjg,
                        Rprec_mult_avgjg: averaged over each topic's groups)
  -T trec_results       results format (the only one)
  -o                    accepted and ignored (trec_eval's old output format, obsolete there
                        too)
  -Z FILE               print each value as a z-score against FILE's per-topic means, lines
                        'qid measure mean stddev' (-1000000 where FILE has none)

Input: QRELS lines 'qid iter docno grade', RUN lines 'qid Q0 docno rank score runid',
whitespace separated, read as trec_eval 10.0 reads them: a run's '#' lines and blank lines are
skipped; a qrels '#' line is skipped in column 0 unless the line before was one, and a blank
qrels line is an error; scores and grades are read as C's atof/atol read them (the number a
field starts with, 0 if none; a warning says so), and a NaN score is refused. Results are
ranked by score, ties by docno, both descending; the rank column is ignored. Topics absent
from the qrels are ignored; a qrels topic without results stops the evaluation (exit 4)
unless -c is given, as in trec_eval 10.0.
"""

_LONG_OPTS = [
    "help", "version", "query_eval_wanted", "measure=", "complete_rel_info_wanted",
    "level_for_rel=", "nosummary", "Debug_level=", "Judged_docs_only",
    "Number_docs_in_coll=", "Max_retrieved_per_topic=", "Rel_info_format=", "Results_format=",
    "Output_old_results_format=", "Zscore=",
]


class CommandLineError(UsageError):
    """A command line trec_eval rejects before reading any file: exit status 1."""

    exit_code = 1


def _int_option(text: str) -> int:
    return c_atol(text.lstrip(WHITESPACE).encode())[0]  # trec_eval reads these with atol


def _parse_args(argv: list[str]) -> tuple[Options, list[str], list[str], bool, bool]:
    try:
        pairs, positional = getopt.gnu_getopt(argv, "hvqm:cl:nD:JN:M:R:T:oZ:", _LONG_OPTS)
    except getopt.GetoptError as exc:
        raise CommandLineError(f"{exc}\n{USAGE.rstrip()}") from None
    opts: dict[str, object] = {}
    specs: list[str] = []
    want_help = want_version = False
    for flag, value in pairs:
        key = flag.lstrip("-")
        if key in ("h", "help"):
            want_help = True
        elif key in ("v", "version"):
            want_version = True
        elif key in ("q", "query_eval_wanted"):
            opts["query_flag"] = True
        elif key in ("m", "measure"):
            specs.append(value)
        elif key in ("c", "complete_rel_info_wanted"):
            opts["all_queries"] = True
        elif key in ("l", "level_for_rel"):
            opts["rel_level"] = _int_option(value)
        elif key in ("n", "nosummary"):
            opts["summary_flag"] = False
        elif key in ("J", "Judged_docs_only"):
            opts["judged_only"] = True
        elif key in ("N", "Number_docs_in_coll"):
            opts["num_docs"] = _int_option(value)
        elif key in ("M", "Max_retrieved_per_topic"):
            m = _int_option(value)
            if m < 0:  # trec_eval crashes on it
                raise UsageError(f"option {flag} needs a non-negative integer, got '{value}'")
            opts["max_retrieved"] = m
        elif key in ("D", "Debug_level"):
            _, dot, qid = value.partition(".")
            if dot and qid:
                opts["only_qid"] = qid
        elif key in ("R", "Rel_info_format"):
            opts["rel_format"] = _rel_format(value)
        elif key in ("T", "Results_format"):
            if value != "trec_results":
                raise UsageError(f"unsupported results format '{value}' (only 'trec_results')")
        elif key in ("o", "Output_old_results_format"):
            pass  # obsolete in trec_eval 10 as well
        elif key in ("Z", "Zscore"):
            opts["zscores_path"] = value
    return Options(**opts), specs, positional, want_help, want_version  # type: ignore[arg-type]


def _rel_format(value: str) -> str:
    if value in ("qrels", "qrels_jg"):
        return value
    if value in ("prefs", "qrels_prefs"):
        raise UsageError(f"-R {value} (preference judgments) is not supported by rageval "
                         "trec-eval; it reads -R qrels and -R qrels_jg")
    # trec_eval reads the files first and then rejects the format (exit 2 as well).
    raise UsageError(f"illegal rel_format '{value}' (trec_eval 10.0 reads qrels, qrels_jg, "
                     "prefs and qrels_prefs; rageval trec-eval reads qrels and qrels_jg)")


def _help_text(specs: list[str]) -> str:
    from rageval.retrieval.trec_eval.selection import select_measures

    text = HELP
    if specs:
        try:
            chosen = select_measures(specs)
        except UsageError:
            chosen = []
        if chosen:
            text += "\nmeasures:\n"
            for sel in chosen:
                m = sel.measure
                default = ",".join(_param_text(v) for v in m.default) if m.default else ""
                extra = f" (default parameters: {default})" if default else ""
                text += f"  {m.name:<22}{m.doc}{extra}\n"
    return text


def _param_text(v: object) -> str:
    return str(int(v)) if isinstance(v, int | float) and float(v).is_integer() else str(v)


def main(argv: list[str], stdout: TextIO | None = None) -> int:
    """Run ``trec-eval`` with ``argv`` (without the program name); return the exit status.

    Output goes to ``stdout`` (default ``sys.stdout``); errors are printed to stderr and give
    trec_eval's exit status: 1 for a command line it rejects, 2 for a file it cannot read or
    parse (and for a feature rageval does not support), 4 where it stops at a topic, 7 when it
    evaluates no topic, 255 for a -Z file it cannot parse.
    """
    out = stdout if stdout is not None else sys.stdout
    failure: RagevalError | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputWarning)
        try:
            _main(argv, out)
        except RagevalError as exc:
            failure = exc
    for warning in caught:  # the readers' warnings first, then any error
        if issubclass(warning.category, InputWarning):
            print(terminal_lines(f"rageval: warning: {warning.message}"), file=sys.stderr)
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                   warning.lineno)
    if failure is not None:
        print(terminal_lines(failure.format()), file=sys.stderr)
        return failure.exit_code
    return 0


def _main(argv: list[str], out: TextIO) -> None:
    opts, specs, positional, want_help, want_version = _parse_args(list(argv))
    if want_help:
        out.write(_help_text(specs))
        return
    if want_version:
        print(f"rageval trec-eval {_version()} (trec_eval 10.0 compatible)", file=sys.stderr)
        return
    if len(positional) != 2:
        raise CommandLineError(f"expected QRELS and RUN files\n{USAGE.rstrip()}")
    qrels_path, run_path = positional
    slices = start_slices(run_path, opts) if run_path != "-" else None
    try:
        _check_names(specs)
    except BaseException:
        if slices is not None:
            slices.close()
        raise
    if run_path == "-":
        _main_stdin(qrels_path, specs, opts, out)
    else:
        _evaluate_and_write(qrels_path, run_path, specs, opts, out, slices)


def _check_names(specs: list[str]) -> None:
    from rageval.retrieval.trec_eval.selection import UnknownMeasure, check_names

    try:
        check_names(specs)
    except UnknownMeasure as exc:
        raise CommandLineError(str(exc)) from None


def _evaluate_and_write(qrels_path: str, run_path: str, specs: list[str], opts: Options,
                        out: TextIO, slices: RunSlices | None = None) -> None:
    from rageval.retrieval.trec_eval.evaluation import TopicStop, run_evaluation
    from rageval.retrieval.trec_eval.output import write_results

    try:
        qids, results = run_evaluation(qrels_path, run_path, specs, opts, slices)
    except TopicStop as stop:
        # trec_eval has printed (with -q) the topics it finished before the one it stopped at.
        if stop.partial is not None:
            write_results(*stop.partial, replace(opts, summary_flag=False), out)
        raise
    write_results(qids, results, opts, out)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rageval")
    except Exception:  # not installed (running from a checkout)
        return "unknown"


def _main_stdin(qrels_path: str, specs: list[str], opts: Options, out: TextIO) -> None:
    data = sys.stdin.buffer.read()
    with tempfile.NamedTemporaryFile("wb", suffix=".run", delete=False) as tmp:
        tmp.write(data)
        name = tmp.name
    try:
        _evaluate_and_write(qrels_path, name, specs, opts, out)
    finally:
        os.unlink(name)
