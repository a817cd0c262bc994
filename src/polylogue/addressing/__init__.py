"""Chat addressing tasks beside the turn-taking benchmark: addressee recognition and next
speaker / responder prediction (P@1), with simple baselines and reports.

See ``docs/corpora-chat.md``. Data come from conversations with reply structure (the ``irc``
and ``molweni`` readers); nothing here trains a model.
"""

from polylogue.addressing.evaluate import TaskReport, evaluate_task, report_markdown, write_reports
from polylogue.addressing.tasks import TASKS, AddressingExample, Task, examples

__all__ = [
    "TASKS",
    "AddressingExample",
    "Task",
    "TaskReport",
    "evaluate_task",
    "examples",
    "report_markdown",
    "write_reports",
]
