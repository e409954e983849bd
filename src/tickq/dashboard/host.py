"""What the dashboard needs of the ``Queue`` it shows, as a protocol: the dashboard sits
beside the facade's web factories (``q.asgi_app(dashboard=True)``), so it must not import
``tickq.queue`` (that would close an import circle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..job import Attempt, Job
    from ..registry import JobDefinition
    from ..schedule import ScheduleDefinition
    from ..store import SqlStore
    from ..workflow.records import WorkflowRun


class Queue(Protocol):
    """The part of ``tickq.Queue`` the dashboard reads and acts through."""

    @property
    def _store(self) -> SqlStore: ...

    @property
    def _schedules(self) -> Mapping[str, ScheduleDefinition]: ...

    def get_job(self, job_id: int) -> Job | None: ...

    def _definition(self, job_type: str) -> JobDefinition | None: ...

    def attempts(self, job_id: int) -> list[Attempt]: ...

    def retry_failed(self, type: str | None = None, *, batch: int = ...,
                     progress: Any = None) -> int: ...  # fmt: skip

    def workflow_runs(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> list[WorkflowRun]: ...

    def cancel_workflow(self, run_id: int) -> WorkflowRun: ...

    def retry_workflow_step(self, run_id: int, seq: int) -> WorkflowRun: ...
