"""Server-specific request fields (``--judge-extra KEY=VALUE``, ``[judge.extra]``, ``extra=``):
sent in the request body as they are, part of the cache key, the signature and the manifest,
and refused where rageval sets the field itself."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_server import JudgeServer

from rageval.cli import main
from rageval.core.errors import UsageError
from rageval.judge.llm.options import JudgeOptions, parse_extra

KEY = "sk-test-extra-0123456789"
ENV = "RAGEVAL_TEST_EXTRA_KEY"
EXTRA = {"repeat_penalty": 1.1, "cache_prompt": False, "stop": ["\n\n"]}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[JudgeServer]:
    monkeypatch.setenv(ENV, KEY)
    with JudgeServer(expected_key=KEY) as s:
        yield s


def _records(path: Path) -> Path:
    rows = [{"id": f"q{i}", "query": f"What is fact {i}?", "contexts": [f"Fact {i} is blue."],
             "answer": f"Fact {i} is blue.", "reference": f"Fact {i} is blue."}
            for i in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(tmp_path: Path, out: str, *flags: str) -> int:
    return main(["score", str(tmp_path / "r.jsonl"), "-m", "judge:faithfulness",
                 "-m", "claims:claim_recall", "--judge-model", "m", "--cache",
                 str(tmp_path / "c.sqlite"), "--judge-api-key-env", ENV, "--out",
                 str(tmp_path / out), "--no-progress", "--bootstrap", "10", *flags],
                stdout=io.StringIO())


def test_extra_fields_are_sent_keyed_signed_and_recorded(server: JudgeServer,
                                                         tmp_path: Path) -> None:
    _records(tmp_path / "r.jsonl")
    flags = ["--judge-extra", "repeat_penalty=1.1", "--judge-extra", "cache_prompt=false",
             "--judge-extra", 'stop=["\\n\\n"]']
    assert _score(tmp_path, "a", "--judge-base-url", server.base_url, *flags) == 0
    sent = server.requests
    assert sent > 2 and all({k: b.get(k) for k in EXTRA} == EXTRA for b in server.bodies)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text(encoding="utf-8"))
    for name in ("judge:faithfulness", "claims:claim_recall"):
        assert '|extra:cache_prompt=false,repeat_penalty=1.1,stop=["\\n\\n"]|' in \
            summary["metrics"][name]["signature"] + "|"
    assert summary["manifest"]["judge"]["extra"] == EXTRA
    # The same fields replay offline; without them the cached replies are not these.
    assert _score(tmp_path, "b", "--offline", *flags) == 0
    assert server.requests == sent
    assert _score(tmp_path, "c", "--offline") == 2


def test_the_evaluation_file_takes_a_judge_extra_table(server: JudgeServer,
                                                       tmp_path: Path) -> None:
    _records(tmp_path / "r.jsonl")
    (tmp_path / "eval.toml").write_text(
        'metrics = ["judge:faithfulness"]\n[inputs]\nrecords = "r.jsonl"\n'
        f'[judge]\nmodel = "m"\nbase_url = "{server.base_url}"\napi_key_env = "{ENV}"\n'
        'cache = "c.sqlite"\n[judge.extra]\nrepeat_penalty = 1.1\ncache_prompt = false\n'
        'stop = ["\\n\\n"]\n', encoding="utf-8")
    code = main(["run", str(tmp_path / "eval.toml"), "--out", str(tmp_path / "o"),
                 "--no-progress", "--bootstrap", "10"], stdout=io.StringIO())
    assert code == 0
    assert server.bodies and all({k: b.get(k) for k in EXTRA} == EXTRA for b in server.bodies)


@pytest.mark.parametrize(("flag", "message"), [
    ("temperature=0.5", "set by rageval itself (use --judge-temperature)"),
    ("stream=true", "set by rageval itself"),
    ("n=2", "use --judge-samples"),
    ("repeat_penalty", "expected KEY=VALUE"),
    ("=1", "expected KEY=VALUE"),
    ("bad-name=1", "is not a request field name"),
    ("top_k=NaN", "must be a JSON value"),
    ("top_k=null", "is null: leave it out"),
])
def test_fields_rageval_sets_itself_or_malformed_ones_are_refused(
        tmp_path: Path, flag: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    _records(tmp_path / "r.jsonl")
    assert _score(tmp_path, "o", "--judge-base-url", "http://127.0.0.1:9/v1",
                  "--judge-extra", flag) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists() and not (tmp_path / "c.sqlite").exists()


def test_values_read_as_json_where_they_are() -> None:
    assert parse_extra(["a=1", "b=1.5", "c=true", "d=null", "e=text", "f=[1, 2]", 'g="2"',
                        "h=", "i=x=y"]) == {"a": 1, "b": 1.5, "c": True, "d": None,
                                            "e": "text", "f": [1, 2], "g": "2", "h": "",
                                            "i": "x=y"}
    with pytest.raises(UsageError, match="given twice"):
        parse_extra(["a=1", "a=2"])


def test_extra_fields_change_the_cache_key() -> None:
    plain = JudgeOptions(model="m")
    extra = JudgeOptions(model="m", extra={"repeat_penalty": 1.1})
    assert plain.params() != extra.params()
    assert extra.params()["repeat_penalty"] == 1.1


def test_a_bar_in_a_value_cannot_split_the_signature_and_the_fields_are_read_only() -> None:
    """Signatures are fields joined by "|": a grammar or stop string holding one is escaped
    as JSON allows; and the fields a signature was made from cannot change after."""
    judge = JudgeOptions(model="m", extra={"grammar": 'root ::= "a" | "b"', "stop": ["|"]})
    [extra] = judge.signed("extra")
    assert "|" not in extra.value
    assert extra.value == ('grammar="root ::= \\"a\\" \\u007c \\"b\\"",'
                           'stop=["\\u007c"]')
    with pytest.raises(TypeError):
        judge.extra["stop"] = []  # type: ignore[index]
