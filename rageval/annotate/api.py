"""The JSON API of ``rageval annotate``, which the page uses and scripts may too, apart from
HTTP (the server checks the token and writes the answers): each request is a path, its query
and its body; each answer a status and a JSON object.

* ``GET /api/next``: the next record to label, or ``{"done": true, "progress": ...}``;
* ``GET /api/record?id=ID``: a record of the walk and this annotator's label of it (or null);
* ``POST /api/label`` ``{"id", "metric", "label"}``: the written line and the progress;
* ``POST /api/skip`` ``{"id", "metric"}``: the record moves to the end of the queue;
* ``POST /api/undo`` ``{}``: an undo line for this annotator's last label.

A refused request is 400 with ``{"error": reason}``; an unknown path 404. A request the server
cannot answer is 500 with ``{"error": ...}`` and one line on stderr: a labels file that no longer
reads (a line written by hand: its file, line and field), or the disk refusing a write (its
reason and path); any other failure is a bug, said as ``internal error: TYPE`` with its traceback
on stderr only. The judge's score and reasoning are sent only when the server was started with
``--show-judge``."""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from rageval.annotate.queue import AnnotatorQueue, Refused
from rageval.annotate.run import LabelledItem
from rageval.core.errors import RagevalError
from rageval.core.outputs.text import terminal, terminal_lines

__all__ = ["MAX_BODY_BYTES", "Answer", "Api"]

#: The largest request body read (a label is a few dozen bytes).
MAX_BODY_BYTES = 64 * 1024

Answer = tuple[int, dict[str, Any]]


class Api:
    """The answers of one server: its queue, and whether the judge is shown."""

    def __init__(self, queue: AnnotatorQueue, *, show_judge: bool = False) -> None:
        self.queue, self.show_judge = queue, show_judge
        self._get: dict[str, Callable[[Mapping[str, list[str]]], dict[str, Any]]] = {
            "/api/next": self._next, "/api/record": self._record}
        self._post: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "/api/label": self._label, "/api/skip": self._skip, "/api/undo": self._undo}

    def get(self, path: str, query: Mapping[str, list[str]]) -> Answer:
        handler = self._get.get(path)
        if handler is None:
            return 404, {"error": f"no such page: {path}"}
        return self._answer(lambda: handler(query))

    def post(self, path: str, body: bytes) -> Answer:
        handler = self._post.get(path)
        if handler is None:
            return 404, {"error": f"no such page: {path}"}
        try:
            data = json.loads(body.decode("utf-8")) if body.strip() else {}
        except (UnicodeDecodeError, ValueError):
            return 400, {"error": "the body is not JSON"}
        if not isinstance(data, dict):
            return 400, {"error": "the body must be a JSON object"}
        return self._answer(lambda: handler(data))

    # -- the requests -----------------------------------------------------------------------

    def _next(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        item = self.queue.next()
        progress = self.queue.progress()
        if item is None:
            return {"done": True, "progress": progress, "annotator": self.queue.annotator,
                    "metric": self.queue.metric}
        return self._payload(item, progress)

    def _record(self, query: Mapping[str, list[str]]) -> dict[str, Any]:
        ids = query.get("id") or [None]
        item, label = self.queue.item(ids[0])
        return {**self._payload(item, self.queue.progress()), "label": _number(label)}

    def _label(self, data: dict[str, Any]) -> dict[str, Any]:
        line, progress = self.queue.label(data.get("id"), data.get("metric"), data.get("label"))
        return {"line": _written(line.encode()), "progress": progress}

    def _skip(self, data: dict[str, Any]) -> dict[str, Any]:
        return {"progress": self.queue.skip(data.get("id"), data.get("metric"))}

    def _undo(self, data: dict[str, Any]) -> dict[str, Any]:
        line, progress = self.queue.undo()
        return {"line": _written(line.encode()), "progress": progress}

    def _payload(self, item: LabelledItem, progress: dict[str, int]) -> dict[str, Any]:
        run = self.queue.run
        out = {**item.to_json(), "metric": run.metric, "scale": run.scale.to_json(),
               "criterion": run.criterion, "progress": progress,
               "annotator": self.queue.annotator}
        if self.show_judge:
            out["judge"] = {"score": item.score, "reasoning": item.reasoning()}
        return out

    def _answer(self, call: Callable[[], dict[str, Any]]) -> Answer:
        """The call's answer; a failure is said to the client and, in one line, on stderr
        (the server keeps serving: the next request may well succeed)."""
        try:
            return 200, call()
        except Refused as refusal:
            return 400, {"error": str(refusal)}
        except RagevalError as error:
            print(terminal_lines(error.format()), file=sys.stderr)
            return 500, {"error": str(error)}
        except OSError as error:
            where = error.filename or self.queue.labels.path
            reason = f"{error.strerror or error}: {where}"
            print(terminal(f"rageval: error: {reason}"), file=sys.stderr)
            return 500, {"error": reason}
        except Exception as error:
            # A bug: its traceback stays on the terminal, never in the page.
            traceback.print_exc(file=sys.stderr)
            return 500, {"error": f"internal error: {type(error).__name__}"}


def _written(encoded: bytes) -> dict[str, Any]:
    """The line as the file holds it."""
    return json.loads(encoded)


def _number(value: float | None) -> float | int | None:
    return int(value) if value is not None and float(value).is_integer() else value
