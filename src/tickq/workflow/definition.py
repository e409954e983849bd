"""Internal: one registered workflow (``@q.workflow``) and the checks its start payload
must pass."""

from __future__ import annotations

from ..errors import ConfigurationError
from ..job_options import JobOptions
from ..signature import parameters, payload_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..registry import JobDefinition


class WorkflowDefinition:
    """One registered workflow: its function, name, the queue of its driver jobs, and the
    checks its start payload must pass (those of a job function's payload)."""

    __slots__ = ("check", "fn", "name", "queue")

    def __init__(self, fn: Callable[..., Any], name: str, queue: str) -> None:
        self.fn, self.name, self.queue = fn, name, queue
        self.check = payload_check(fn, name)


def payload_check(fn: Callable[..., Any], name: str) -> JobDefinition:
    """A ``JobDefinition`` of ``fn`` used only to check start payloads (its first
    parameter, the ``WorkflowContext``, is not part of them)."""
    from ..registry import JobDefinition
    from ..signature import is_async

    if is_async(fn):
        raise ConfigurationError(f"workflow {name!r} is async; a workflow function is a def")
    params = parameters(fn)
    if not params or params[0][0] in ("conn",):
        raise ConfigurationError(
            f"workflow {name!r} must take a WorkflowContext as its first parameter, e.g. "
            f"def {getattr(fn, '__name__', name)}(wf: WorkflowContext, ...)"
        )
    accepted, required = payload_names(params, params[0][0])
    return JobDefinition(fn=fn, options=JobOptions(name=name), is_async=False,
                         context_param=params[0][0], accepted=accepted,
                         required=required)  # fmt: skip
