"""Internal: durable workflows (``@q.workflow``): a run is a driver job replaying the
workflow function over the steps recorded so far (see docs/workflows.md)."""
