"""trec-eval starts reading its run before it loads the measures: the early start must change
nothing but the time.

- Importing the options module loads the TREC readers only; the package's public names still
  load on first use.
- Slices started by the caller are the slices evaluated, with the same output; a command line
  refused after they started (an unknown measure) leaves no worker thread behind.
- The slices' pipeline calls ahead of its consumer from the start, in order, and stops at the
  end; the first slice is a short one (parsing begins once it is read), the rest as long as
  asked.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rageval.cli import trec_eval_command
from rageval.retrieval.trec import chunked_read
from rageval.retrieval.trec.chunked_read import _byte_slices, _prefetched
from rageval.retrieval.trec_eval.evaluation import run_evaluation
from rageval.retrieval.trec_eval.options import Options, start_slices
from rageval.retrieval.trec_eval.output import write_results

RUN = "".join(f"q{q} Q0 d{d} {d} {10 - d}.5 sys\n" for q in range(1, 4) for d in range(1, 6))
QRELS = "q1 0 d2 1\nq1 0 d4 2\nq2 0 d1 1\nq3 0 d5 1\n"


def files(tmp_path: Path) -> tuple[str, str]:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text(QRELS)
    run.write_text(RUN)
    return str(qrels), str(run)


def test_the_options_load_no_measure() -> None:
    code = ("import json, sys\n"
            "import rageval.retrieval.trec_eval.options\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    loaded = set(json.loads(done.stdout))
    assert "rageval.retrieval.trec.chunked_read" in loaded
    heavy = {"rageval.retrieval.trec_eval.catalogue", "rageval.retrieval.kernels",
             "rageval.retrieval.ranking", "rageval.retrieval.trec_eval.evaluation"}
    assert loaded.isdisjoint(heavy)


def test_the_package_names_load_on_first_use() -> None:
    from rageval.retrieval import trec_eval
    from rageval.retrieval.trec_eval import MEASURES, NICKNAMES, UsageError, select_measures

    assert any(m.name == "map" for m in MEASURES)
    assert "official" in NICKNAMES
    assert select_measures(["P.5"])[0].names == ("P_5",)
    assert issubclass(UsageError, Exception)
    assert callable(trec_eval.evaluate_files)
    assert trec_eval.Measure is type(MEASURES[0])
    with pytest.raises(AttributeError):
        trec_eval.no_such_name  # noqa: B018


def render(qrels: str, run: str, opts: Options, started: bool) -> str:
    slices = start_slices(run, opts) if started else None
    qids, results = run_evaluation(qrels, run, ["official", "P.2"], opts, slices)
    out = io.StringIO()
    write_results(qids, results, opts, out)
    return out.getvalue()


@pytest.mark.parametrize("chunk", [1, 40, 1 << 20])
def test_slices_started_early_give_the_same_output(tmp_path: Path, chunk: int) -> None:
    qrels, run = files(tmp_path)
    opts = Options(query_flag=True, chunk_bytes=chunk)
    whole = render(qrels, run, Options(query_flag=True, chunk_bytes=0), started=False)
    assert render(qrels, run, opts, started=True) == whole
    assert render(qrels, run, opts, started=False) == whole


def test_options_that_read_the_whole_file_start_no_slices(tmp_path: Path) -> None:
    _, run = files(tmp_path)
    assert start_slices(run, Options(rel_format="qrels_jg")) is None
    assert start_slices(run, Options(only_qid="q1")) is None
    assert start_slices(run, Options(chunk_bytes=0)) is None
    assert start_slices(str(tmp_path / "missing"), Options()) is None
    slices = start_slices(run, Options())
    assert slices is not None
    slices.close()


def test_a_refused_measure_leaves_no_reader_behind(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = files(tmp_path)
    before = threading.active_count()
    out = io.StringIO()
    assert trec_eval_command.main(["-m", "nope", qrels, run], stdout=out) == 1
    assert out.getvalue() == ""
    assert "unknown measure 'nope'" in capsys.readouterr().err
    assert threading.active_count() == before


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_the_pipeline_calls_ahead_from_the_start_and_in_order(ahead: int) -> None:
    items = iter(range(10))
    calls: list[int] = []
    started = threading.Event()

    def produce() -> int | None:
        calls.append(1)
        if len(calls) == ahead + 1:
            started.set()
        return next(items, None)

    with ThreadPoolExecutor(max_workers=1) as pool:
        got = _prefetched(pool, produce, ahead)
        assert started.wait(timeout=30)  # before anything is asked for
        assert list(got) == list(range(10))
        assert next(got, None) is None


def test_the_first_slice_is_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, run = files(tmp_path)
    monkeypatch.setattr(chunked_read, "_FIRST_BYTES", 30)
    sizes = [len(piece) for piece in _byte_slices(run, 100)]
    assert sum(sizes) == len(RUN)
    line = len(RUN.splitlines(keepends=True)[0])
    assert sizes[0] == 30 // line * line  # whole lines
    assert all(100 - line < size <= 100 for size in sizes[1:-1])
    assert len(next(_byte_slices(run, 20))) == 20 // line * line


def _blas_threads() -> str:
    """Code that prints the thread counts of the BLAS libraries loaded (threadpoolctl)."""
    return ("from threadpoolctl import threadpool_info\n"
            "print(json.dumps([pool['num_threads'] for pool in threadpool_info()"
            " if pool['user_api'] == 'blas']))\n")


def test_the_command_loads_no_general_parser_and_no_blas_threads(tmp_path: Path) -> None:
    """``rageval trec-eval`` reads its own command line: the general parser (argparse and what
    it loads) is not imported, and numpy's BLAS keeps to one thread it would never use."""
    pytest.importorskip("threadpoolctl")
    qrels, run = files(tmp_path)
    code = ("import io, json, os, sys\n"
            "from rageval.cli import main\n"
            f"status = main(['trec-eval', '-m', 'map', {qrels!r}, {run!r}], stdout=io.StringIO())\n"
            "print(json.dumps([status, sorted(sys.modules),"
            " os.environ.get('OPENBLAS_NUM_THREADS')]))\n"
            + _blas_threads())
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)
    *_, first, last = done.stdout.splitlines()
    status, loaded, variable = json.loads(first)
    assert status == 0
    assert "rageval.retrieval.trec_eval.evaluation" in loaded
    assert "rageval.cli.parser" not in loaded and "argparse" not in loaded
    assert variable is None  # put back once numpy is loaded
    assert json.loads(last) and set(json.loads(last)) == {1}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 processors for a BLAS pool")
def test_importing_the_command_module_leaves_blas_as_it_was() -> None:
    """Only running the command keeps BLAS to one thread; a program that imports the module
    (and numpy after it) gets numpy's usual pool."""
    pytest.importorskip("threadpoolctl")
    code = "import json, rageval.cli.trec_eval_command, numpy\n" + _blas_threads()
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)
    pools = json.loads(done.stdout.splitlines()[-1])
    assert pools and max(pools) > 1


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval import cli

    def closed(argv: list[str], stdout: object = None) -> int:
        raise BrokenPipeError

    monkeypatch.setattr(trec_eval_command, "main", closed)
    assert cli.main(["trec-eval", *files(tmp_path)]) == 0
