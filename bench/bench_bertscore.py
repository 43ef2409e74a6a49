"""BERTScore: rageval (cached token embeddings) against bert-score's ``bert_score.score``.

    python bench/bench_bertscore.py                    # 5,000 pairs, 4 systems, 3 repeats
    python bench/bench_bertscore.py --pairs 500 --repeats 2
    python bench/bench_bertscore.py --model-shape roberta-large --pairs 200 --device cuda
    python bench/bench_bertscore.py --model-dir ~/models/roberta-large --num-layers 17
    python bench/bench_bertscore.py --device cuda --pairs 2000 --systems 2 \
        --model-shape minilm roberta-large                 # the GPU table, both shapes

Every system answers the same references (answer-like texts of 40-80 words). Scenarios:

(a) one system: ``bert_score.score(answers, references)`` against ``rageval.evaluate`` with an
    empty embedding cache (both load the model inside the timed region);
(b) a second system over the same references, as a new run: rageval starts with nothing in
    memory and no model loaded, and finds the references' embeddings in its disk cache;
(c) four systems over the shared references: four ``bert_score.score`` calls against four
    rageval runs, either in one process (embeddings kept in memory) or as four separate runs
    (memory and model dropped between runs, embeddings read back from disk).

What the disk cache costs: (a)'s rageval run is also timed with ``cache=none`` (no disk cache)
in every repeat, and the files the cached run wrote are counted.

"Cold" means what a new process pays once its libraries are imported: loading the tokenizer and
the model, tokenising, the forward passes and the matching (for rageval also writing its disk
cache). Python's one-off imports (transformers' model code, bert-score's modules) are not timed:
an untimed warm-up of both on two pairs pays them before the first repeat, so that neither side
is charged for them by running first.

The timings are medians over ``--repeats``; each repeat starts rageval from a fresh cache
directory. ``--json`` also records every timing and each repeat's own ratios (bert-score /
rageval, measured moments apart), which drift less than the medians on a busy machine. Every
rageval value is checked against bert-score's (P, R and F1 of every pair, within 1e-6).

``--model-shape roberta-large`` times a randomly initialised model with roberta-large's
dimensions (24 layers, hidden size 1024, 16 heads; layer 17 as bert-score uses it), built
locally and saved to a temporary directory, so nothing is downloaded. Its tokenizer is the
bundled all-MiniLM-L6-v2 WordPiece tokenizer (no RoBERTa BPE vocabulary is available offline),
so token counts are WordPiece's, close to what RoBERTa's BPE gives for English. It is meant for a
GPU; on a CPU keep ``--pairs`` small.

Several models are timed one after another: ``--model-shape`` takes both shapes, and
``--model-dir`` may be given several times (the directories first). After each model's own
table the script prints one markdown table of them all, naming the device (the GPU's
``torch.cuda.get_device_name``, or the processor), for the docs; ``--json`` then holds
``{"runs": [...]}``, one summary per model (a single model's summary alone, as before).

``--model-dir DIR`` times a model saved in a directory (``save_pretrained``: weights, config and
tokenizer), loaded by both sides from there, so a real model is timed without downloads; its
layer is ``--num-layers N`` (bert-score's name for it; ``--layer`` is the same), else the
model's last (``num_hidden_layers`` in its ``config.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rageval.generation.bertscore as bs  # noqa: E402
from rageval.api import evaluate  # noqa: E402
from rageval.core.records import Record  # noqa: E402
from rageval.generation.bertscore.dependencies import _version  # noqa: E402
from rageval.generation.bertscore.models import _model_spec  # noqa: E402

TOLERANCE = 1e-6

_SUBJECTS = ["the company", "revenue", "the new model", "our cloud platform", "the board",
             "operating income", "the retriever", "customer demand", "the central bank",
             "the research team", "net profit", "the quarterly report", "the data center",
             "inflation", "the product launch", "the European segment", "free cash flow"]
_VERBS = ["increased", "declined", "was driven by", "depends on", "improved", "reported",
          "remained stable despite", "was offset by", "grew faster than", "benefited from",
          "was reduced by", "exceeded", "is expected to follow", "was announced with"]
_OBJECTS = ["higher energy costs", "strong demand for subscriptions", "twelve percent",
            "the previous year", "new hiring in research", "a share buyback program",
            "lower interest rates", "weaker sales in Asia", "better recall at ten",
            "longer context windows", "supply chain delays", "a one-time tax benefit",
            "the acquisition of a smaller rival", "rising wages", "stable margins",
            "record enrollment", "fewer hallucinated citations", "the updated guidance"]
_LINKS = ["because", "while", "and", "although", "so", "after", "as"]


def _sentence(rng: random.Random) -> str:
    parts = [rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS)]
    if rng.random() < 0.6:
        parts += [rng.choice(_LINKS), rng.choice(_SUBJECTS), rng.choice(_VERBS),
                  rng.choice(_OBJECTS)]
    text = " ".join(parts)
    return text[0].upper() + text[1:] + "."


def _text(rng: random.Random, low: int = 40, high: int = 80) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    while len(words) < target:
        words += _sentence(rng).split()
    return " ".join(words[:target]).rstrip(",") + "."


def _answer(rng: random.Random, reference: str) -> str:
    """An answer-like paraphrase: reference words dropped, replaced, reordered, extended."""
    words = [w for w in reference.split() if rng.random() > 0.15]
    words = [rng.choice(_OBJECTS).split()[0] if rng.random() < 0.1 else w for w in words]
    if rng.random() < 0.3:
        cut = len(words) // 2
        words = words[cut:] + words[:cut]
    extra = _text(rng, 5, 20).split() if rng.random() < 0.5 else []
    words = (words + extra)[: rng.randint(40, 80)]
    return " ".join(words)


def make_data(pairs: int, systems: int, seed: int) -> tuple[list[str], list[list[str]]]:
    rng = random.Random(seed)
    references = [_text(rng) for _ in range(pairs)]
    answers = [[_answer(random.Random(f"{seed}-{s}-{i}"), ref) for i, ref in enumerate(references)]
               for s in range(systems)]
    return references, answers


def _roberta_large_shape(directory: Path, seed: int) -> str:
    """A random model of roberta-large's dimensions, saved with the MiniLM tokenizer."""
    import torch
    from transformers import RobertaConfig, RobertaModel

    source = Path(_model_spec(bs.DEFAULT_MODEL).source)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copy(source / name, directory / name)
    config = RobertaConfig(
        vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
        intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1,
        pad_token_id=0,  # the WordPiece tokenizer's [PAD]
        layer_norm_eps=1e-5,
    )
    torch.manual_seed(seed)
    RobertaModel(config).save_pretrained(directory)
    return str(directory)


def _records(answers: list[str], references: list[str]) -> list[Record]:
    return [Record(id=str(i), answer=a, references=(r,))
            for i, (a, r) in enumerate(zip(answers, references, strict=True))]


def _new_run() -> None:
    """What a new rageval process starts with: nothing in memory, no model loaded."""
    bs.clear_memory_cache()
    bs.unload_models()


def _time_bert_score(answers, references, model, layer, args) -> tuple[float, np.ndarray]:
    import bert_score

    start = time.perf_counter()
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        p, r, f = bert_score.score(answers, references, model_type=model, num_layers=layer,
                                   batch_size=args.batch_size, device=args.device_resolved)
    elapsed = time.perf_counter() - start
    return elapsed, np.stack([p.numpy(), r.numpy(), f.numpy()], axis=1).astype(np.float64)


def _time_rageval(metric, answers, references) -> tuple[float, np.ndarray]:
    records = _records(answers, references)
    start = time.perf_counter()
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        results = evaluate(records, [metric])
    elapsed = time.perf_counter() - start
    head = str(metric.name)
    values = np.array([[r.scores[f"{head}.{p}"] for p in ("precision", "recall", "f1")]
                       for r in results.records], dtype=np.float64)
    return elapsed, values


def _warm_up(model: str, name: str, layer: int, args: argparse.Namespace, work: Path) -> None:
    """Pay the one-off Python imports of both sides, untimed (see the module docstring)."""
    references, answers = make_data(2, 1, args.seed + 1)
    _time_bert_score(answers[0], references, model, layer, args)
    metric = bs.BertScore(model=name, layer=layer, batch_size=args.batch_size,
                          device=args.device_resolved, cache=str(work / "warm-up"))
    _time_rageval(metric, answers[0], references)
    shutil.rmtree(work / "warm-up", ignore_errors=True)


def _ratios(rows: dict[str, list[float]], systems: int) -> dict[str, list[float]]:
    """Each repeat's bert-score / rageval ratio of every scenario."""
    bert = [rows[f"bert-score system {s + 1}"] for s in range(systems)]
    runs = [rows[f"rageval run {s + 1} (new process, disk cache)"] for s in range(systems)]
    repeats = range(len(bert[0]))
    return {
        "(a)": [bert[0][k] / runs[0][k] for k in repeats],
        "(b)": [bert[1][k] / runs[1][k] for k in repeats],
        "(c) one process": [sum(b[k] for b in bert) / rows["rageval one process"][k]
                            for k in repeats],
        "(c) separate runs": [sum(b[k] for b in bert) / sum(r[k] for r in runs)
                              for k in repeats],
    }


def _choices(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The models to time, in order: ("dir", DIR) for each --model-dir, then ("shape", NAME)
    for each --model-shape (minilm when neither is given)."""
    shapes = args.model_shape or ([] if args.model_dir else ["minilm"])
    return [("dir", d) for d in args.model_dir or []] + [("shape", s) for s in shapes]


def _model(args: argparse.Namespace, work: Path,
           choice: tuple[str, str] | None = None) -> tuple[str, str, int]:
    """The model bert-score loads, the name rageval's metric is given, and the layer, of
    ``choice`` (default: the first of :func:`_choices`). ``--num-layers`` sets the layer of
    every model directory, and of a model shape when it is the only model timed."""
    kind, value = choice or _choices(args)[0]
    if kind == "dir":
        directory = Path(value).expanduser().resolve()
        if not (directory / "config.json").is_file():
            sys.exit(f"--model-dir {directory}: no config.json there (a save_pretrained "
                     "directory is needed)")
        layer = args.layer or json.loads((directory / "config.json").read_text()).get(
            "num_hidden_layers")
        if not layer:
            sys.exit(f"--model-dir {directory}: its config.json gives no num_hidden_layers; "
                     "give --num-layers N")
        return str(directory), str(directory), int(layer)
    layer = args.layer if len(_choices(args)) == 1 else None
    if value == "roberta-large":
        model_dir = work / "roberta-large-shape"
        model_dir.mkdir(exist_ok=True)
        print("building a random roberta-large-shaped model ...", flush=True)
        return (_roberta_large_shape(model_dir, args.seed),) * 2 + (layer or 17,)
    return (_model_spec(bs.DEFAULT_MODEL).source, bs.DEFAULT_MODEL, layer or bs.DEFAULT_LAYER)


def _label(choice: tuple[str, str], layer: int) -> str:
    """The model's name in the tables."""
    kind, value = choice
    if kind == "dir":
        return f"{Path(value).expanduser().resolve().name}, layer {layer}"
    if value == "roberta-large":
        return f"roberta-large shape, layer {layer}"
    return f"all-MiniLM-L6-v2, layer {layer}"


class _Repeats:
    """Every repeat's timings, files counted and value differences from bert-score."""

    def __init__(self) -> None:
        self.rows: dict[str, list[float]] = {}
        self.files: list[int] = []
        self.diffs: list[float] = []
        self.beyond = 0

    def record(self, key: str, seconds: float) -> None:
        self.rows.setdefault(key, []).append(seconds)

    def check(self, got: np.ndarray, expected: np.ndarray) -> None:
        diff = np.abs(got - expected)
        self.diffs.append(float(diff.max()))
        self.beyond += int((diff.max(axis=1) > TOLERANCE).sum())


def _repeat(args: argparse.Namespace, data: tuple[list[str], list[list[str]]],
            model: tuple[str, str, int], cache: Path, out: _Repeats) -> None:
    """One repeat of every scenario, with a fresh cache directory."""
    references, answers = data
    source, name, layer = model

    def metric(setting: str) -> Any:
        return bs.BertScore(model=name, layer=layer, batch_size=args.batch_size,
                            device=args.device_resolved, cache=setting)

    expected = []
    # (a), (b) and (c, separate runs): each system a new run, sharing the disk cache;
    # bert-score and rageval alternate so that each pair is timed moments apart
    for s in range(args.systems):
        seconds, values = _time_bert_score(answers[s], references, source, layer, args)
        out.record(f"bert-score system {s + 1}", seconds)
        expected.append(values)
        _new_run()
        seconds, values = _time_rageval(metric(str(cache / "a")), answers[s], references)
        out.record(f"rageval run {s + 1} (new process, disk cache)", seconds)
        out.check(values, expected[s])
        if s == 0:  # what the disk cache costs: the same run without it
            out.files.append(sum(1 for p in (cache / "a").rglob("*") if p.is_file()))
            _new_run()
            seconds, values = _time_rageval(metric("none"), answers[0], references)
            out.record("rageval run 1 (new process, cache=none)", seconds)
            out.check(values, expected[0])
    # (c, one process): embeddings kept in memory between systems
    one_process = metric(str(cache / "c"))
    _new_run()
    total = 0.0
    for s in range(args.systems):
        seconds, values = _time_rageval(one_process, answers[s], references)
        total += seconds
        out.check(values, expected[s])
    out.record("rageval one process", total)


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every model of :func:`_choices`, one after another: its summary."""
    import torch

    args.device_resolved = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    if args.device_resolved.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"--device {args.device}: torch sees no CUDA device")
    data = make_data(args.pairs, args.systems, args.seed)
    return [_run_model(args, choice, data) for choice in _choices(args)]


def _run_model(args: argparse.Namespace, choice: tuple[str, str],
               data: tuple[list[str], list[list[str]]]) -> dict[str, Any]:
    import torch

    references, answers = data
    work = Path(tempfile.mkdtemp(prefix="rageval-bench-bertscore-", dir=args.work_dir))
    out = _Repeats()
    try:
        model = _model(args, work, choice)
        _new_run()
        _warm_up(model[0], model[1], model[2], args, work)
        for repeat in range(args.repeats):
            print(f"{_label(choice, model[2])}: repeat {repeat + 1}/{args.repeats}", flush=True)
            _repeat(args, data, model, work / f"cache-{repeat}", out)
            shutil.rmtree(work / f"cache-{repeat}", ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        _new_run()  # the next model starts from nothing either
    texts = len(set(references) | set(answers[0]))
    result = _summary(args, out, model[2], Path(choice[1]).name if choice[0] == "dir"
                      else choice[1], texts, torch.get_num_threads())
    result["config"]["model"] = _label(choice, model[2])
    return result


def _summary(args: argparse.Namespace, out: _Repeats, layer: int, label: str, texts: int,
             threads: int) -> dict[str, Any]:
    rows = out.rows
    med = {key: statistics.median(values) for key, values in rows.items()}
    k = args.systems
    bert_all = sum(med[f"bert-score system {s + 1}"] for s in range(k))
    rageval_separate = sum(med[f"rageval run {s + 1} (new process, disk cache)"]
                           for s in range(k))
    scenarios = [
        ("(a) one system, cold cache", args.pairs,
         med["bert-score system 1"], med["rageval run 1 (new process, disk cache)"]),
        ("(b) 2nd system, same references", args.pairs,
         med["bert-score system 2"], med["rageval run 2 (new process, disk cache)"]),
        (f"(c) {k} systems, one process", k * args.pairs, bert_all, med["rageval one process"]),
        (f"(c) {k} systems, separate runs", k * args.pairs, bert_all, rageval_separate),
    ]
    cached, uncached = (rows["rageval run 1 (new process, disk cache)"],
                        rows["rageval run 1 (new process, cache=none)"])
    return {
        "config": {"pairs": args.pairs, "systems": k, "repeats": args.repeats,
                   "model_shape": label, "layer": layer,
                   "batch_size": args.batch_size, "device": args.device_resolved,
                   "device_name": _device_name(args.device_resolved),
                   "torch_threads": threads, "seed": args.seed},
        "versions": {p: _version(p) for p in ("bert-score", "transformers", "torch")},
        "timings_s": rows,
        "speedup_per_repeat": _ratios(rows, k),
        "scenarios": [
            {"scenario": s, "pairs": n, "bert_score_s": b, "rageval_s": r,
             "bert_score_pairs_per_s": n / b, "rageval_pairs_per_s": n / r, "speedup": b / r}
            for s, n, b, r in scenarios
        ],
        "disk_cache": {
            "texts": texts, "files_written": statistics.median(out.files),
            "cache_s": statistics.median(cached), "cache_none_s": statistics.median(uncached),
            "cost": statistics.median(cached) / statistics.median(uncached),
            "cost_per_repeat": [c / u for c, u in zip(cached, uncached, strict=True)],
        },
        "check": {"max_abs_diff": max(out.diffs), "pairs_beyond_tolerance": out.beyond,
                  "tolerance": TOLERANCE},
    }


def _print(result: dict[str, Any]) -> None:
    cfg = result["config"]
    print(f"\nBERTScore, {cfg['pairs']} pairs x {cfg['systems']} systems, model "
          f"{cfg['model']}, device {cfg['device']} "
          f"({cfg['torch_threads']} threads), median of {cfg['repeats']}")
    header = f"{'scenario':34} {'pairs':>6} {'bert-score':>17} {'rageval':>17} {'speedup':>8}"
    print(header)
    print("-" * len(header))
    for row in result["scenarios"]:
        print(f"{row['scenario']:34} {row['pairs']:>6} "
              f"{row['bert_score_s']:7.2f}s {row['bert_score_pairs_per_s']:6.1f}/s "
              f"{row['rageval_s']:7.2f}s {row['rageval_pairs_per_s']:6.1f}/s "
              f"{row['speedup']:7.2f}x")
    disk = result["disk_cache"]
    print(f"disk cache, (a) cold: {disk['cache_s']:.2f}s with it, {disk['cache_none_s']:.2f}s "
          f"with cache=none: {disk['cost']:.2f}x (per repeat "
          f"{', '.join(f'{c:.2f}x' for c in disk['cost_per_repeat'])}); it wrote "
          f"{disk['files_written']:g} files for {disk['texts']:,} texts")
    check = result["check"]
    verdict = "agree" if check["pairs_beyond_tolerance"] == 0 else "DISAGREE"
    print(f"values {verdict}: max |rageval - bert-score| = {check['max_abs_diff']:.2e} over P, "
          f"R, F1 of every pair ({check['pairs_beyond_tolerance']} pairs beyond "
          f"{check['tolerance']:g})")


def _device_name(device: str) -> str:
    """The GPU's name (torch.cuda.get_device_name), or the processor's."""
    import torch

    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "CPU"


def markdown(results: list[dict[str, Any]], command: str) -> str:
    """The issue's table: every model's scenarios, bert-score and rageval side by side, the
    device named, and how far the values are from bert-score's."""
    cfg = results[0]["config"]
    versions = results[0]["versions"]
    lines = [f"Measured on {cfg['device_name']} ({cfg['device']}; torch {versions['torch']}, "
             f"transformers {versions['transformers']}, {os.cpu_count()} CPU cores, "
             f"{cfg['torch_threads']} torch threads), `{command}`, {cfg['pairs']:,} pairs x "
             f"{cfg['systems']} systems, median of {cfg['repeats']}:", "",
             "| model | scenario | bert-score | rageval | speedup |", "|---|---|---:|---:|---:|"]
    for result in results:
        model = result["config"]["model"]
        for row in result["scenarios"]:
            lines.append(f"| {model} | {row['scenario']} | {row['bert_score_s']:.2f} s | "
                         f"{row['rageval_s']:.2f} s | {row['speedup']:.2f}x |")
            model = ""
    worst = max(r["check"]["max_abs_diff"] for r in results)
    beyond = sum(r["check"]["pairs_beyond_tolerance"] for r in results)
    lines += ["", f"Values {'agree' if beyond == 0 else 'DISAGREE'} (max difference "
              f"{worst:.2e}; {beyond} pairs beyond {TOLERANCE:g}). The disk cache: " + "; ".join(
                  f"{r['config']['model']}: {r['disk_cache']['cost']:.2f}x of cache=none, "
                  f"{r['disk_cache']['files_written']:g} files for {r['disk_cache']['texts']:,} "
                  "texts" for r in results) + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5000, help="pairs per system")
    parser.add_argument("--systems", type=int, default=4, help="systems sharing references")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model-shape", nargs="+", choices=("minilm", "roberta-large"),
                        default=None,
                        help="model shapes to time, one after another (default: minilm, "
                             "unless --model-dir is given)")
    parser.add_argument("--model-dir", action="append", default=None,
                        help="time the model saved in this directory (no download); may be "
                             "given several times")
    parser.add_argument("--layer", "--num-layers", dest="layer", type=int, default=None,
                        help="the layer of every --model-dir (default: each one's last), and "
                             "of a --model-shape timed alone (default: its own)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", default=None, help="where temporary caches go")
    parser.add_argument("--json", default=None, help="also write every number here")
    args = parser.parse_args(argv)
    if args.systems < 2:
        parser.error("--systems must be at least 2")
    results = run(args)
    for result in results:
        _print(result)
    command = " ".join(["bench/bench_bertscore.py", *(sys.argv[1:] if argv is None else argv)])
    print("\n" + markdown(results, command))
    if args.json:
        kept = results[0] if len(results) == 1 else {"runs": results}
        Path(args.json).write_text(json.dumps(kept, indent=2) + "\n")
    return 0 if all(r["check"]["pairs_beyond_tolerance"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
