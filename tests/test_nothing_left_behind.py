"""What a failed command leaves behind: no empty judge cache, no half-made results directory,
and an --out that cannot be written (a dangling symbolic link) refused before scoring."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServer

from rageval.api import evaluate
from rageval.cli import main
from rageval.core.errors import InputError, UsageError
from rageval.judge.llm.cache.store import JudgeCache, cache_key

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "fixtures" / "demo" / "records.jsonl"


def _key(i: int) -> str:
    return cache_key("m", [{"role": "user", "content": f"q{i}"}])


def test_a_cache_file_is_created_with_its_first_reply(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "c.sqlite"
    with JudgeCache(path) as cache:
        assert len(cache) == 0 and cache.get(_key(0)) is None
        assert cache.missing([_key(0)]) == [_key(0)] and cache.entries() == []
        assert cache.stats()["entries"] == 0
        assert not path.exists() and not path.parent.exists()
        cache.put(_key(0), {"model": "m"}, "reply")
        assert path.exists() and len(cache) == 1


def test_a_cache_another_process_creates_is_read(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with JudgeCache(path) as reader:
        assert reader.get(_key(1)) is None
        with JudgeCache(path) as writer:
            writer.put(_key(1), {"model": "m"}, "reply")
        entry = reader.get(_key(1))
        assert entry is not None and entry.reply_text == "reply"


def test_an_uncreatable_cache_is_refused_at_once(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="is not a directory"):
        JudgeCache(blocker / "c.sqlite")


def test_a_refused_import_leaves_no_cache(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "nope"}\n')
    target = tmp_path / "c.sqlite"
    assert main(["cache", "import", str(bad), "--cache", str(target)]) == 2
    assert "line 1" in capsys.readouterr().err
    assert not target.exists()


def test_a_failed_judge_run_leaves_no_cache(tmp_path: Path) -> None:
    cache = tmp_path / "c.sqlite"
    with JudgeServer() as server:
        server.always = "401"
        code = main(["score", str(DEMO), "-m", "judge:faithfulness", "--judge-model", "m",
                     "--judge-base-url", server.base_url, "--cache", str(cache),
                     "--out", str(tmp_path / "out"), "--no-progress", "--bootstrap", "10"],
                    stdout=io.StringIO())
    assert code != 0
    assert list(tmp_path.iterdir()) == []  # neither the cache nor the results directory


def test_a_dangling_out_link_is_refused_before_scoring(tmp_path: Path, capsys) -> None:
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    for out in (link, link / "run1"):
        code = main(["score", str(DEMO), "-m", "p@3", "--out", str(out), "--no-progress"],
                    stdout=io.StringIO())
        err = capsys.readouterr().err
        assert code == 2
        assert f"{link} is a symbolic link to {tmp_path / 'gone'}, which does not exist" in err
        assert "Traceback" not in err
    assert os.readlink(link) == str(tmp_path / "gone") and not (tmp_path / "gone").exists()


def test_a_dangling_out_link_is_refused_by_the_api(tmp_path: Path) -> None:
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(UsageError, match="symbolic link"):
        evaluate(str(DEMO), ["p@3"], out=link, bootstrap=10)


def test_an_out_link_to_a_directory_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "out"
    link.symlink_to(real)
    assert main(["score", str(DEMO), "-m", "p@3", "--out", str(link), "--no-progress",
                 "--bootstrap", "10"], stdout=io.StringIO()) == 0
    assert json.loads((real / "summary.json").read_text())["metrics"]["p@3"]
