"""D8: a launch (or continue_task) whose sub-agent budget exceeds what is left of the run's asks first. At
the command line that question is about spending, so ``--budget-approve`` answers it — ``--approve all``
(a flag for tool calls) never lets a run pass its budget."""

from __future__ import annotations

import io

import pytest

from workbench.cli.decide import _Decider
from workbench.cli.output import _Output
from workbench.session import Question

LAUNCH = Question("approval-call_1", "tool_approval",
                  {"tool": "delegate_to_a2", "arguments": {"task": "two"}, "exceeds_budget": "total_tokens 600 > 385 left",
                   "reason": "Launching a2 with its budget (total_tokens 600 > 385 left) would exceed what is left of "
                             "this run's budget"}, "call_1")
PLAIN = Question("approval-call_2", "tool_approval", {"tool": "write_file", "arguments": {"path": "/project/a"},
                                                      "reason": "ask"}, "call_2")


def decider(approve: str, budget: str) -> tuple[_Decider, io.StringIO]:
    err = io.StringIO()
    return _Decider(approve, budget, interactive=False, output=_Output(False, io.StringIO(), err)), err


@pytest.mark.parametrize("approve", ["all", "none", "ask"])
def test_d8_approve_flags_do_not_answer_a_launch_over_the_budget(approve):
    d, _ = decider(approve, "ask")
    assert d.decide(LAUNCH) is None  # no terminal: the run suspends (exit 4) with the question listed


def test_d8_budget_approve_yes_allows_the_launch_and_says_so():
    d, err = decider("none", "yes")
    assert d.decide(LAUNCH) == {"decision": "approve"}
    assert "--budget-approve yes" in err.getvalue() and "total_tokens 600 > 385 left" in err.getvalue()
    assert d.decide(PLAIN)["decision"] == "reject"  # tool calls still go by --approve


def test_d8_budget_approve_no_refuses_the_launch_naming_why():
    d, _ = decider("all", "no")
    answer = d.decide(LAUNCH)
    assert answer["decision"] == "reject" and "--budget-approve no" in answer["message"]
    assert d.decide(PLAIN) == {"decision": "approve"}
