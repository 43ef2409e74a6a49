"""``--phoenix-annotate``: checked before a run scores anything, done once it has written its
results (see :mod:`rageval.phoenix`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rageval.core.errors import RagevalError, UsageError
from rageval.core.outputs.masking import NO_SECRETS
from rageval.core.outputs.text import terminal, terminal_lines
from rageval.inputs.spec import TRACE_KINDS

if TYPE_CHECKING:
    from rageval.core.outputs.masking import Masker
    from rageval.core.results import Results
    from rageval.inputs.spec import InputSpec


def check_annotate(args: argparse.Namespace, spec: InputSpec) -> None:
    """Refuse ``--phoenix-annotate`` without a server and project, or for records that did
    not come from traces (they have no span to go back to)."""
    if not getattr(args, "phoenix_annotate", False):
        return
    if args.phoenix is None or not args.project:
        raise UsageError("--phoenix-annotate needs the server and project to write to: "
                         "--phoenix URL --project NAME")
    if spec.reader() not in TRACE_KINDS:
        raise UsageError("--phoenix-annotate writes each record's scores to the span it came "
                         "from: read the records from traces (--input-format openinference "
                         "or otel-genai, or --phoenix URL --project NAME)")
    from rageval.inputs.traces.phoenix import phoenix_client

    phoenix_client(args.phoenix)  # the URL and the client checked before anything is scored


def annotate_step(args: argparse.Namespace, spec: InputSpec, results: Results,
                  masker: Masker = NO_SECRETS) -> bool:
    """Write the run's values to their spans, every credential ``masker`` knows masked, and
    say on stderr how many went where; False (the error said) when the server could not take
    them: the run's results stand."""
    if not getattr(args, "phoenix_annotate", False):
        return True
    from rageval.inputs.traces.phoenix import phoenix_source
    from rageval.phoenix import annotate_run

    try:
        report = annotate_run(results, spec, args.phoenix, args.project, masker)
    except RagevalError as error:
        text = f"{error.format()} (the scores were not written to Phoenix; the run's results " \
               "stand)"
        print(terminal_lines(masker(text)), file=sys.stderr)
        return False
    where = phoenix_source(args.phoenix, args.project)
    missing = (f"; {report.missing} records' spans are not in the project (not annotated)"
               if report.missing else "")
    print(terminal(f"wrote {report.written} annotations on {report.records} spans to "
                   f"{where}{missing}"), file=sys.stderr)
    return True
