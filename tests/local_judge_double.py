"""A stand-in for llama-cpp-python's server, run as a process the way ``LocalJudge`` runs the
real one: it lists its model at ``/v1/models`` and answers chat completions with a fixed
reply, until a scripted end kills it with a signal or an exit status (``--die`` SIGNAL or
status; ``--on`` when: ``completion`` N, the Nth completion request, or ``ready`` SECONDS,
that long after the first completion). It prints a few log lines first, as a server would.

    python tests/local_judge_double.py --port P --name NAME --die ILL --on completion:1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--die", default=None, help="a signal name (ILL) or an exit status")
    parser.add_argument("--on", default="completion:1")
    args = parser.parse_args()
    when, _, amount = args.on.partition(":")
    completions = [0]

    def die() -> None:
        sys.stdout.flush()
        if args.die.isdigit():
            os._exit(int(args.die))
        # To this thread (a process-wide signal could land in another one, which would go on
        # answering), then wait for it to end the process.
        signal.raise_signal(getattr(signal, f"SIG{args.die}"))
        threading.Event().wait()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *a: object) -> None:
            print(f"request: {fmt % a}", flush=True)

        def _json(self, obj: object) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json({"object": "list", "data": [{"id": args.name, "object": "model"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            completions[0] += 1
            if args.die and when == "completion" and completions[0] == int(amount):
                print("ggml: about to run a kernel", flush=True)
                die()
            if args.die and when == "ready" and completions[0] == 1:
                threading.Timer(float(amount), die).start()
            self._json({"id": "x", "object": "chat.completion", "model": args.name,
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": '{"reasoning": "ok", "score": 3}'}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 5,
                                  "total_tokens": 10}})

    print(f"llama_model_loader: loaded meta data for {args.name}", flush=True)
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
