"""``scripts/fetch_trec_eval.py``: trec_eval 10.0 is written only when every file of the archive
matches the manifest, and the parity tests then find it."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trec_eval_paths import TARBALL

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_trec_eval",
                                                  ROOT / "scripts" / "fetch_trec_eval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _archive(files: dict[str, bytes], top: str = "trec_eval-10.0") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(f"{top}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


TREE = {"Makefile": b"all:\n", "m_map.c": b"int map;\n", "test/out.test": b"map all 0.5\n",
        "test/qrels.test": b"1 0 d1 1\n"}


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = _script()
    manifest = tmp_path / "manifest.sha256"
    manifest.write_text("".join(f"{hashlib.sha256(data).hexdigest()}  {path}\n"
                                for path, data in TREE.items()))
    monkeypatch.setattr(module, "MANIFEST", manifest)
    return module


def test_a_matching_archive_is_written(script: ModuleType, tmp_path: Path) -> None:
    source = tmp_path / "v10.0.tar.gz"
    source.write_bytes(_archive({**TREE, ".github/workflows/push.yml": b"on: push\n"}))
    into = tmp_path / "fetched"
    assert script.main(["--from", str(source), "--into", str(into)]) == 0
    assert (into / "trec_eval-10.0.tar.gz").read_bytes() == source.read_bytes()
    assert (into / "test" / "out.test").read_bytes() == TREE["test/out.test"]
    assert sorted(p.name for p in (into / "test").iterdir()) == ["out.test", "qrels.test"]


@pytest.mark.parametrize("change", ["changed", "missing"])
def test_an_archive_that_differs_writes_nothing(script: ModuleType, tmp_path: Path, capsys,
                                                change: str) -> None:
    files = dict(TREE)
    if change == "changed":
        files["m_map.c"] = b"int map = 1;\n"
    else:
        del files["test/out.test"]
    source = tmp_path / "v10.0.tar.gz"
    source.write_bytes(_archive(files))
    into = tmp_path / "fetched"
    assert script.main(["--from", str(source), "--into", str(into)]) == 1
    err = capsys.readouterr().err
    assert "this is not trec_eval 10.0; nothing was written" in err
    assert ("m_map.c: SHA-256" if change == "changed" else "test/out.test: missing") in err
    assert not into.exists()


def test_not_an_archive(script: ModuleType, tmp_path: Path, capsys) -> None:
    source = tmp_path / "page.html"
    source.write_text("<html>not found</html>")
    assert script.main(["--from", str(source), "--into", str(tmp_path / "x")]) == 1
    assert "not a tar.gz archive" in capsys.readouterr().err


@pytest.mark.skipif(not TARBALL.is_file(), reason=f"no trec_eval 10.0 archive at {TARBALL}")
def test_the_release_archive_matches_the_manifest(tmp_path: Path) -> None:
    """The manifest is the v10.0 tree's: the release archive passes it whole."""
    script = _script()
    into = tmp_path / "fetched"
    assert script.main(["--from", str(TARBALL), "--into", str(into)]) == 0
    assert (into / "test" / "out.test.aqcM").is_file()
    assert len(script.expected()) == 119
