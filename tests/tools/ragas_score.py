"""Run inside the ragas environment (tests/tools/ragas_oracle.py): reads a JSON list of cases
on stdin, writes ragas' scores of each as a JSON list on stdout."""

import json
import sys

from ragas.messages import AIMessage, HumanMessage, ToolCall
from ragas.metrics.collections import ToolCallAccuracy, ToolCallF1


def calls(items):
    return [ToolCall(name=item["name"], args=item["arguments"]) for item in items]


def main():
    f1, strict, any_order = ToolCallF1(), ToolCallAccuracy(), ToolCallAccuracy(strict_order=False)
    out = []
    for case in json.load(sys.stdin):
        # The agent's calls, as ragas reads them: the tool calls of its AI messages, in order.
        user_input = [HumanMessage(content="question"),
                      AIMessage(content="", tool_calls=calls(case["calls"]))]
        expected = calls(case["expected"])
        out.append({
            "f1": f1.score(user_input=user_input, reference_tool_calls=expected).value,
            "accuracy": strict.score(user_input=user_input,
                                     reference_tool_calls=expected).value,
            "accuracy_any": any_order.score(user_input=user_input,
                                            reference_tool_calls=expected).value,
        })
    json.dump(out, sys.stdout)


main()
