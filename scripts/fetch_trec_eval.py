"""Fetch trec_eval 10.0 (its source and its own test data) for rageval's parity tests.

    python scripts/fetch_trec_eval.py              # downloads tag v10.0 from GitHub
    python scripts/fetch_trec_eval.py --from FILE  # a copy of that archive already at hand

The archive is checked file by file against ``trec_eval-10.0.sha256`` beside this script (the
SHA-256 of every file of the v10.0 tree but its GitHub workflow): a file missing or changed
stops here, naming it, and nothing is written. What passes is written to ``.trec_eval/`` at the
top of the repository (git ignores it): the archive, from which the tests build the real
binary with ``make``, and its ``test/`` folder, whose expected outputs the tests compare with.
Then the README's test command runs the parity tests instead of skipping them. The standard
library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

URL = "https://github.com/usnistgov/trec_eval/archive/refs/tags/v10.0.tar.gz"
HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "trec_eval-10.0.sha256"
DESTINATION = HERE.parent / ".trec_eval"
ARCHIVE_NAME = "trec_eval-10.0.tar.gz"


def expected() -> dict[str, str]:
    """Path inside the tree -> its SHA-256, from the manifest."""
    out = {}
    for line in MANIFEST.read_text().splitlines():
        digest, _, path = line.partition("  ")
        out[path] = digest
    return out


def files_of(archive: bytes) -> dict[str, bytes]:
    """Every regular file of a tar.gz archive by its path below the top folder."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            _, _, path = member.name.partition("/")
            handle = tar.extractfile(member)
            if path and handle is not None:
                out[path] = handle.read()
    return out


def problems(files: dict[str, bytes], wanted: dict[str, str]) -> list[str]:
    """What keeps ``files`` from being trec_eval 10.0: each file missing or changed."""
    out = []
    for path, digest in sorted(wanted.items()):
        data = files.get(path)
        if data is None:
            out.append(f"{path}: missing")
        elif hashlib.sha256(data).hexdigest() != digest:
            out.append(f"{path}: SHA-256 {hashlib.sha256(data).hexdigest()}, expected {digest}")
    return out


def write(archive: bytes, files: dict[str, bytes], destination: Path) -> None:
    """The archive and its test folder under ``destination``."""
    tests = destination / "test"
    tests.mkdir(parents=True, exist_ok=True)
    (destination / ARCHIVE_NAME).write_bytes(archive)
    for path, data in files.items():
        if path.startswith("test/"):
            (tests / path.removeprefix("test/")).write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", metavar="FILE",
                        help="a copy of the v10.0 archive (tar.gz) instead of downloading it")
    parser.add_argument("--into", metavar="DIR", default=str(DESTINATION),
                        help=f"where to write (default {DESTINATION})")
    args = parser.parse_args(argv)
    if args.source:
        archive = Path(args.source).read_bytes()
    else:
        print(f"downloading {URL}", file=sys.stderr)
        with urllib.request.urlopen(URL, timeout=120) as response:
            archive = response.read()
    try:
        files = files_of(archive)
    except (tarfile.TarError, OSError, EOFError) as exc:
        print(f"fetch_trec_eval: not a tar.gz archive: {exc}", file=sys.stderr)
        return 1
    found = problems(files, expected())
    if found:
        print("fetch_trec_eval: this is not trec_eval 10.0; nothing was written:",
              *found[:10], file=sys.stderr, sep="\n  ")
        return 1
    write(archive, files, Path(args.into))
    print(f"trec_eval 10.0 checked ({len(expected())} files) and written to {args.into}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
