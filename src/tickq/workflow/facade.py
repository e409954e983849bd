"""The ``Queue``'s workflow methods (a mixin of the facade), over its ``Runtime``,
and the ``WorkflowFunction`` that ``@q.workflow`` returns."""

from __future__ import annotations

from datetime import timedelta

from ..errors import ConfigurationError
from ..job_options import EnqueueOptions, check_name, check_queue
from .records import DRIVER_TYPE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..runtime import Runtime
    from .definition import WorkflowDefinition
    from .records import WorkflowRun

DEFAULT_KEEP = timedelta(days=7)
"""How long ``send_event`` keeps an event for runs that reach ``wait_for`` later."""


class WorkflowFunction:
    """A function registered with ``@q.workflow``: ``.start(**payload)`` starts a run."""

    def __init__(self, runtime: Runtime, definition: WorkflowDefinition) -> None:
        self._runtime, self._definition = runtime, definition
        self.__wrapped__ = definition.fn
        self.__doc__ = definition.fn.__doc__
        self.__name__ = getattr(definition.fn, "__name__", definition.name)

    @property
    def name(self) -> str:
        """The workflow's name, as its runs record it."""
        return self._definition.name

    def start(self, *, conn: Any = None, **payload: Any) -> int:
        """Start a run with ``payload`` as the function's keyword arguments; returns its
        id. With ``conn=`` the run is stored in that connection's open transaction: commit
        and it runs, roll back and it never existed. A payload that can't be stored, or
        doesn't fit the function, raises ``TypeError`` naming the field."""
        from ..payload import dump_payload

        try:
            payload_json = dump_payload(payload, self.name)
        except TypeError as exc:
            raise TypeError(str(exc).replace(" of job ", " of workflow ", 1)) from None
        try:
            self._definition.check.check_payload(payload)
        except TypeError as exc:
            raise TypeError(
                str(exc).replace("does not fit job ", "does not fit workflow ", 1)
            ) from None
        options = EnqueueOptions(queue=self._definition.queue)
        driver = self._runtime.new_job(DRIVER_TYPE, {"workflow": self.name}, options)
        return self._runtime.store.start_run(
            driver, self.name, payload_json, _runner(self._runtime, conn)
        )

    def __repr__(self) -> str:
        return f"<tickq workflow {self.name!r}>"


def _runner(runtime: Runtime, conn: Any) -> Any:
    if conn is None:
        return None
    from ..store.foreign import sync_runner

    return sync_runner(runtime.store, conn)


class Workflows:
    """The ``Queue``'s workflow methods (a mixin of the facade), over its ``Runtime``."""

    __slots__ = ()
    if TYPE_CHECKING:
        _runtime: Runtime

    def workflow(
        self, *, name: str | None = None, queue: str = "default"
    ) -> Callable[[Callable[..., Any]], WorkflowFunction]:
        """Register a durable workflow: a function whose first parameter is a
        ``WorkflowContext``; ``.start(**payload)`` starts a run (docs/workflows.md).

        >>> @q.workflow()
        ... def onboarding(wf: WorkflowContext, user_id: int) -> None:
        ...     wf.run(send_welcome, user_id=user_id)
        ...     wf.sleep(timedelta(days=3))
        ...     wf.run(send_nudge, user_id=user_id)

        Its runs are replayed from the top by a driver job (type ``tickq.workflow``, in
        ``queue``) each time they go on: steps are ordinary jobs, recorded once; sleeps
        and waits hold no worker.
        """
        from .definition import WorkflowDefinition
        from .driver import driver_definition

        chosen = check_queue(queue)

        def register(fn: Callable[..., Any]) -> WorkflowFunction:
            workflow = check_name("workflow name", name or getattr(fn, "__name__", ""))
            if workflow in self._runtime.workflows:
                raise ConfigurationError(f"a workflow named {workflow!r} is already registered")
            definition = WorkflowDefinition(fn, workflow, chosen)
            if DRIVER_TYPE not in self._runtime.registry:
                self._runtime.registry.add(driver_definition(self._runtime))
            self._runtime.workflows[workflow] = definition
            return WorkflowFunction(self._runtime, definition)

        return register

    def send_event(
        self,
        name: str,
        *,
        key: str = "",
        data: Any = None,
        conn: Any = None,
        keep: timedelta = DEFAULT_KEEP,
    ) -> int:
        """Deliver an event to every run waiting for ``name`` and ``key`` (``wf.wait_for``),
        and keep it for ``keep`` (default 7 days) for runs that get there later; each run
        receives it at most once. Returns the event's id. With ``conn=`` it is sent in that
        connection's open transaction: roll back and it resumes nothing. ``data`` must be
        JSON-storable (refused with a ``TypeError`` naming the field otherwise)."""
        from ..job_options import check_text
        from ..payload import dump_payload

        check_name("event name", name)
        check_text("key", key)
        if not isinstance(keep, timedelta) or keep <= timedelta(0):
            raise ConfigurationError(f"keep must be a positive timedelta, got {keep!r}")
        try:
            dump_payload({"data": data}, name)
        except TypeError as exc:
            raise TypeError(str(exc).replace("payload['data']", "data", 1)
                            .replace(" of job ", " of event ", 1)) from None  # fmt: skip
        import json

        data_json = None if data is None else json.dumps(data, separators=(",", ":"))
        store = self._runtime.store
        return store.send_event(name, key, data_json, keep.total_seconds(),
                                _runner(self._runtime, conn))[0]  # fmt: skip

    def workflow_run(self, run_id: int) -> WorkflowRun:
        """The run ``run_id``: ``.status``, ``.result``, ``.error`` and ``.steps``."""
        from ..errors import JobNotFound

        run = self._runtime.store.workflow_run(run_id)
        if run is None:
            raise JobNotFound(f"workflow run {run_id} does not exist")
        return run

    def workflow_runs(
        self, *, status: str | None = None, workflow: str | None = None, limit: int = 50,
        before_id: int | None = None,
    ) -> list[WorkflowRun]:  # fmt: skip
        """Runs newest first (without their steps), filtered; page with ``before_id``."""
        return self._runtime.store.workflow_runs(status, workflow, limit, before_id)

    def cancel_workflow(self, run_id: int) -> WorkflowRun:
        """Cancel a running or waiting run: its driver and open step jobs are cancelled
        (asked to stop, if running) and its waits closed. A done or failed run raises
        ``InvalidTransition``."""
        from ..errors import JobNotFound

        try:
            self._runtime.store.cancel_run(run_id, "Cancelled: by cancel_workflow")
        except LookupError as exc:
            raise JobNotFound(str(exc)) from None
        return self.workflow_run(run_id)

    def retry_workflow_step(self, run_id: int, seq: int) -> WorkflowRun:
        """Let a failed run go on from its failed step ``seq`` (``WorkflowStep.seq``): the
        step's job runs again (one more attempt) and the run replays once it ends. Only a
        failed run: raises ``InvalidTransition`` otherwise."""
        from ..errors import JobNotFound

        try:
            self._runtime.store.retry_step(run_id, seq)
        except LookupError as exc:
            raise JobNotFound(str(exc)) from None
        return self.workflow_run(run_id)
