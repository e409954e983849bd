"""An OpenAPI 3.0 description of the tick, health and metrics endpoints, built from the
endpoint's own options (paths, methods, limits), so it always matches what is served.

``q.endpoint(**options).openapi()`` returns it as a dict; write it out with
``json.dump`` for a schema-driven tester (the test suite runs Schemathesis against it) or an
API gateway. It documents what each endpoint reveals and the answers it can give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .query import FALSE_WORDS, MAX_DIGITS, TRUE_WORDS

if TYPE_CHECKING:
    from .options import EndpointOptions

JSON = "application/json"


def describe(options: EndpointOptions, title: str = "tickq endpoints") -> dict[str, Any]:
    """The OpenAPI 3.0.3 document for endpoints built with ``options``."""
    from .._version import __version__

    paths = {options.path: tick_operations(options), options.health_path: health_operations()}
    schemes: dict[str, Any] = {"cronSecret": bearer("the tick's token: $CRON_SECRET")}
    if options.metrics:
        paths[options.metrics_path] = metrics_operations()
        schemes["metricsToken"] = bearer("the metrics token: $TICKQ_METRICS_TOKEN")
    return {
        "openapi": "3.0.3",
        "info": {"title": title, "version": __version__},
        "paths": paths,
        "components": {"schemas": SCHEMAS, "securitySchemes": schemes},
    }


def bearer(description: str) -> dict[str, Any]:
    return {"type": "http", "scheme": "bearer", "description": description}


def tick_operations(options: EndpointOptions) -> dict[str, Any]:
    operation = {
        "summary": "Enqueue due schedule slots and run a bounded batch of due jobs",
        "description": (
            "Needs the bearer token; without one configured it answers 503 and runs "
            "nothing. Unknown or repeated query parameters are refused (400)."
        ),
        "security": [{"cronSecret": []}],
        "parameters": [limit_parameter(options), strict_parameter()],
        "responses": {
            "200": json_answer("What the tick did", "TickSummary"),
            "400": error_answer("A query parameter is malformed, repeated or unknown"),
            "401": error_answer("The bearer token is missing or wrong", www_authenticate=True),
            "405": error_answer("Method not allowed (see the Allow header)"),
            "500": json_answer(
                "With ?strict=1: jobs failed for good or due work waited past max_wait "
                "(a summary with strict.problems); or the tick raised (an error)",
                "TickSummaryOrError",
            ),
            "503": error_answer(
                "No secret configured, or the database is down or not migrated; the tick "
                "ran nothing (Retry-After when the database is down)",
                retry_after=True,
            ),
        },
    }
    methods = ("get", "post") if options.allow_get else ("post",)
    return {method: {**operation, "operationId": f"tick_{method}"} for method in methods}


def limit_parameter(options: EndpointOptions) -> dict[str, Any]:
    return {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": (
            f"Jobs to run at most (default {options.limit}); ASCII digits only, capped at "
            f"max_limit ({options.max_limit})"
        ),
        "schema": {"type": "integer", "minimum": 0, "maximum": 10**MAX_DIGITS - 1},
    }


def strict_parameter() -> dict[str, Any]:
    words = [*TRUE_WORDS, *FALSE_WORDS]
    either_case = "|".join("".join(f"[{c.lower()}{c.upper()}]" for c in w) for w in words)
    return {
        "name": "strict",
        "in": "query",
        "required": False,
        "description": "1/true/yes/on: answer 500 on new permanent failures or stale work",
        "schema": {"type": "string", "pattern": f"^({either_case})$"},
    }


def health_operations() -> dict[str, Any]:
    responses = {
        "200": json_answer("A scheduler is calling the tick in time", "Health"),
        "405": error_answer("Method not allowed (see the Allow header)"),
        "503": json_answer(
            "The tick is stale or never ran, or the database is down (Retry-After then)",
            "Health",
            retry_after=True,
        ),
    }
    description = (
        "Public and read-only: when the last tick ran, never job data. An anonymous "
        "request causes no work; sent with the tick's bearer token, a stale tick also "
        "raises and delivers the overdue alert."
    )
    return {
        "get": {"operationId": "health_get", "summary": "Is a scheduler still calling?",
                "description": description, "responses": responses},
        "head": {"operationId": "health_head", "summary": "The health status, no body",
                 "responses": {code: {"description": r["description"]}
                               for code, r in responses.items()}},
    }  # fmt: skip


def metrics_operations() -> dict[str, Any]:
    responses = {
        "200": {
            "description": "Prometheus text exposition",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        "401": error_answer("The bearer token is missing or wrong", www_authenticate=True),
        "405": error_answer("Method not allowed (see the Allow header)"),
        "503": error_answer(
            "No metrics token configured (or too short), or the database is down or not "
            "migrated (Retry-After when it is down)",
            retry_after=True,
        ),
    }
    security: list[dict[str, list[str]]] = [{"metricsToken": []}]
    return {
        "get": {"operationId": "metrics_get", "summary": "Queue metrics for Prometheus",
                "security": security, "responses": responses},
        "head": {"operationId": "metrics_head", "summary": "Metrics status, no body",
                 "security": security,
                 "responses": {code: {"description": r["description"]}
                               for code, r in responses.items()}},
    }  # fmt: skip


def json_answer(description: str, schema: str, retry_after: bool = False) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {JSON: {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
    if retry_after:
        answer["headers"] = {"Retry-After": {"schema": {"type": "string"}}}
    return answer


def error_answer(
    description: str, www_authenticate: bool = False, retry_after: bool = False
) -> dict[str, Any]:
    answer = json_answer(description, "Error", retry_after)
    if www_authenticate:
        answer["headers"] = {"WWW-Authenticate": {"schema": {"type": "string"}}}
    return answer


NULLABLE_TIME = {"type": "string", "format": "date-time", "nullable": True}
COUNT = {"type": "integer", "minimum": 0}
SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "string", "description": "What is wrong, what to do"}},
    },
    "TickSummary": {
        "type": "object",
        "required": ["schedules_enqueued", "jobs", "remaining_due", "next_due_at",
                     "oldest_due_age_seconds", "ticked_at", "duration_ms", "limit"],
        "properties": {
            "schedules_enqueued": {"type": "array", "items": {
                "type": "object", "required": ["name", "slot", "missed", "job_id"],
                "properties": {"name": {"type": "string"}, "slot": {"type": "string"},
                               "missed": COUNT, "job_id": {"type": "integer"}}}},
            "jobs": {"type": "object", "required": ["claimed", "succeeded", "retried",
                                                     "snoozed", "failed"],
                     "additionalProperties": COUNT},
            "remaining_due": COUNT,
            "remaining_due_exact": {"type": "boolean", "description":
                                    "False: remaining_due is a floor (counted up to 1000)"},
            "next_due_at": NULLABLE_TIME,
            "oldest_due_age_seconds": {"type": "number", "nullable": True},
            "ticked_at": {"type": "string", "format": "date-time"},
            "duration_ms": {"type": "number", "minimum": 0},
            "limit": COUNT,
            "strict": {"type": "object", "required": ["ok", "problems"], "properties": {
                "ok": {"type": "boolean"},
                "problems": {"type": "array", "items": {"type": "string"}}}},
        },
    },
    "TickSummaryOrError": {
        "oneOf": [{"$ref": "#/components/schemas/TickSummary"},
                  {"$ref": "#/components/schemas/Error"}],
    },
    "Health": {
        "type": "object",
        "required": ["ok", "status"],
        "properties": {
            "ok": {"type": "boolean"},
            "status": {"type": "string", "enum": ["ok", "stale", "no_tick_yet", "error"]},
            "last_tick_at": NULLABLE_TIME,
            "age_seconds": {"type": "number", "nullable": True},
            "ticks": COUNT,
            "stale_after_seconds": {"type": "number"},
            "now": {"type": "string", "format": "date-time"},
            "database": {"type": "object", "description": (
                "SQLite: wal_bytes, wal_bound_bytes, disk_free_bytes; Postgres, to the "
                "tick's token: long_transactions (pid, age_seconds, application_name, "
                "state, holds_snapshot: whether it holds back vacuum's xmin horizon), "
                "each open longer than a minute, the oldest first; to anyone else only "
                "long_transactions_count and oldest_transaction_seconds")},
            "message": {"type": "string"},
            "error": {"type": "string"},
        },
    },
}  # fmt: skip
