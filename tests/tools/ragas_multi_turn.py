"""Run inside the ragas environment (tests/tools/ragas_oracle.py): reads a JSON list of
conversations on stdin (each ``{"turns": [{"query", "calls", "results", "answer"}],
"expected": [...]}``), builds each as ragas' ``MultiTurnSample``, writes them with ragas' own
``EvaluationDataset.to_jsonl`` to the path given, and prints ragas' scores of each."""

import json
import sys

from ragas import EvaluationDataset, MultiTurnSample
from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from ragas.metrics.collections import ToolCallAccuracy, ToolCallF1


def calls(items):
    return [ToolCall(name=item["name"], args=item["arguments"]) for item in items]


def messages(turns):
    out = []
    for turn in turns:
        out.append(HumanMessage(content=turn["query"]))
        if turn["calls"]:
            out.append(AIMessage(content="", tool_calls=calls(turn["calls"])))
            out.extend(ToolMessage(content=result) for result in turn["results"])
        out.append(AIMessage(content=turn["answer"]))
    return out


def main():
    f1, accuracy = ToolCallF1(), ToolCallAccuracy()
    samples, scores = [], []
    for case in json.load(sys.stdin):
        user_input, expected = messages(case["turns"]), calls(case["expected"])
        samples.append(MultiTurnSample(user_input=user_input, reference_tool_calls=expected))
        scores.append({
            "f1": f1.score(user_input=user_input, reference_tool_calls=expected).value,
            "accuracy": accuracy.score(user_input=user_input,
                                       reference_tool_calls=expected).value})
    EvaluationDataset(samples=samples).to_jsonl(sys.argv[1])
    json.dump(scores, sys.stdout)


main()
