"""Typed payloads: parameters annotated with dataclasses, TypedDicts, Enums, datetime, date,
Decimal, UUID and Pydantic models are converted to JSON once at enqueue (bad values refused
with the field's path) and rebuilt for the function, on SQLite and Postgres; unannotated
parameters keep the plain-JSON rules; JSON from outside (webhooks, ``tickq enqueue``) is
checked the same way; a real ``tickq worker`` process runs what the CLI stored."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import hashlib
import hmac
import json
import signal
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, NewType, NotRequired, TypedDict
from uuid import UUID
from zoneinfo import ZoneInfo

import httpx
import pydantic
import pytest

import tickq.payload_types as payload_types
from conftest import tickq_env
from test_payloads import raw_sql
from test_web import serving
from tickq import ConfigurationError, JobContext, JobState, Queue
from tickq.payload_types import PayloadTypes
from tickq.webhooks import HMAC
from workerproc import WorkerProcess, eventually


class Plan(enum.Enum):
    FREE = "free"
    PRO = 2


@dataclasses.dataclass(frozen=True)
class Address:
    city: str
    since: date | None = None


@dataclasses.dataclass
class User:
    email: str
    id: UUID
    address: Address
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Tree:
    name: str
    children: list[Tree] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Positive:
    n: int

    def __post_init__(self) -> None:
        if self.n <= 0:
            raise ValueError(f"n must be positive, got {self.n}")


class Options(TypedDict):
    plan: Plan
    trial_end: NotRequired[datetime]


class Invoice(pydantic.BaseModel):
    number: str
    total: Decimal
    due: date


CustomerId = NewType("CustomerId", UUID)
BERLIN = ZoneInfo("Europe/Berlin")
USER = User("a@example.com", UUID(int=7), Address("Oslo", date(2020, 2, 29)), ["x"])
AT = datetime(2026, 10, 25, 2, 30, fold=1, tzinfo=BERLIN)  # the second 02:30 of that night


def types_of(fn: Any) -> PayloadTypes:
    return PayloadTypes(fn)


# -- which parameters convert (pure) -----------------------------------------------------
def test_plain_parameters_build_no_converter() -> None:
    def plain(a, b=1, *args, c, **kwargs): ...  # type: ignore[no-untyped-def]

    def simple(a: int, b: list[int], c: dict[str, float | None] | None, d: Any = None) -> None: ...

    def strings(a: int, b: list[str] | None = None, c: Any = None) -> None: ...

    assert types_of(plain).fields() == {} and types_of(simple).fields() == {}
    assert types_of(strings).fields() == {}


def test_typed_parameters_are_found_nested_and_postponed() -> None:
    def job(user: User, when: datetime | None, many: list[Address], n: int, x: Any = None,
            ctx: JobContext | None = None) -> None: ...  # fmt: skip

    fields = PayloadTypes(job, "ctx").fields()
    assert sorted(fields) == ["many", "user", "when"]  # under `from __future__ import annotations`


def test_the_converter_is_built_once_per_definition(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    real = payload_types.typed_parameters
    monkeypatch.setattr(payload_types, "typed_parameters",
                        lambda fn, skip: built.append(fn) or real(fn, skip))  # fmt: skip

    @queue.job()
    def dated(day: date) -> None: ...

    @queue.job()
    def plain(n: int) -> None: ...

    for i in range(5):
        dated.enqueue(day=date(2026, 1, 1 + i))
        plain.enqueue(n=i)
    queue.process_jobs()
    assert len(built) == 2  # one per job type, on first use: not at decoration, not per call


# -- the JSON forms (pure) ------------------------------------------------------------------
FORMS = [
    (datetime, datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "2026-01-02T03:04:05.000006+00:00"),
    (datetime, datetime(2026, 1, 2, tzinfo=timezone(timedelta(hours=-3, minutes=-30))),
     "2026-01-02T00:00:00-03:30"),
    (datetime, AT, "2026-10-25T02:30:00+01:00[Europe/Berlin]"),
    (date, date(1, 1, 1), "0001-01-01"),
    (Decimal, Decimal("10.50"), "10.50"),
    (Decimal, Decimal("-0E-7"), "-0E-7"),
    (UUID, UUID(int=1), "00000000-0000-0000-0000-000000000001"),
    (Plan, Plan.PRO, 2),
    (Address, Address("Oslo"), {"city": "Oslo", "since": None}),
    (Options, {"plan": Plan.FREE}, {"plan": "free"}),
    (Invoice, Invoice(number="7", total=Decimal("1.10"), due=date(2026, 1, 31)),
     {"number": "7", "total": "1.10", "due": "2026-01-31"}),
    (list[Decimal], [Decimal(1), Decimal("2.0")], ["1", "2.0"]),
    (dict[str, date], {"a": date(2026, 1, 1)}, {"a": "2026-01-01"}),
    (Tree, Tree("r", [Tree("a")]), {"name": "r", "children": [{"name": "a", "children": []}]}),
    (Annotated[Decimal, "money"], Decimal("0.10"), "0.10"),
    (CustomerId, CustomerId(UUID(int=2)), "00000000-0000-0000-0000-000000000002"),
]  # fmt: skip


@pytest.mark.parametrize(("note", "value", "form"), FORMS, ids=lambda x: repr(x)[:30])
def test_each_type_has_one_json_form_and_comes_back(note: Any, value: Any, form: Any) -> None:
    def job(x: Any) -> None: ...

    job.__annotations__ = {"x": note}
    types = types_of(job)
    stored = types.dump({"x": value}, "job", external=False)
    assert stored == {"x": form} and json.loads(json.dumps(stored)) == stored
    back = types.load(json.loads(json.dumps(stored)), "job")["x"]
    assert back == value and type(back) is type(value)
    assert repr(back) == repr(value)  # digits, offsets, zones and folds too
    assert types.dump({"x": form}, "job", external=True) == {"x": form}  # JSON from outside


# -- refusals name the field and what to do (pure) ----------------------------------------
REFUSED = [
    (datetime, datetime(2026, 1, 1), r"payload\.x: is a naive datetime .* datetime\.now\(UTC\)"),
    (datetime, "2026-01-01T00:00:00+00:00", r"payload\.x: expected datetime, got str .*parsed"),
    (date, datetime(2026, 1, 1, tzinfo=UTC), r"payload\.x: expected date, got datetime .*date\(\)"),
    (Decimal, 1.5, r"payload\.x: expected Decimal, got float 1\.5; pass Decimal\(text\)"),
    (Decimal, Decimal("NaN"), r"payload\.x: is Decimal\('NaN'\); pass a finite Decimal"),
    (Decimal, "1.10", r"payload\.x: expected Decimal, got str '1\.10'; pass Decimal\(value\)"),
    (UUID, "0" * 32, r"payload\.x: expected UUID, got str .*; pass UUID\(text\)"),
    (Plan, "free", r"payload\.x: expected a Plan member, got str 'free'; pass Plan\('free'\)"),
    (User, dataclasses.replace(USER, address=Address(5)),  # type: ignore[arg-type]
     r"payload\.x\.address\.city: expected str, got int 5"),
    (User, {"email": "a"}, r"payload\.x: expected User, got dict .*; pass User\(\*\*value\)"),
    (list[Address], [Address("a"), Address("b", "2026")],  # type: ignore[arg-type]
     r"payload\.x\[1\]\.since: expected date, got str '2026'"),
    (list[int], (1, 2), None),  # no typed part: today's rules (a tuple is refused there)
    (dict[str, UUID], {"k": 1}, r"payload\.x\['k'\]: expected UUID, got int 1"),
    (Options, {"plan": Plan.PRO, "extra": 1}, r"payload\.x: Options has no field 'extra'"),
    (Options, {}, r"payload\.x: Options misses required field 'plan'"),
    (Invoice, {"number": "1"}, r"payload\.x: expected Invoice, got dict .*model_validate"),
]  # fmt: skip


@pytest.mark.parametrize(("note", "value", "message"), REFUSED, ids=lambda x: repr(x)[:30])
def test_a_bad_value_is_refused_with_its_path(note: Any, value: Any, message: str | None) -> None:
    def job(x: Any) -> None: ...

    job.__annotations__ = {"x": note}
    if message is None:
        assert types_of(job).fields() == {}
        return
    with pytest.raises(TypeError, match=message + r".*\(job 'job'\)$"):
        types_of(job).dump({"x": value}, "job", external=False)


EXTERNAL = [
    (datetime, "2026-01-01T09:00:00", r"payload\.x: '2026-01-01T09:00:00' has no UTC offset"),
    (datetime, "soon", r"payload\.x: 'soon' is not an ISO 8601 date and time"),
    (Decimal, 1.1, r"payload\.x: expected a decimal number as a string"),
    (Plan, "gold", r"payload\.x: str 'gold' is not a Plan value \(one of 'free', 2\)"),
    (Plan, ["free"], r"payload\.x: list \['free'\] is not a Plan value"),
    (User, {"email": "a", "id": "nope", "address": {"city": "c"}},
     r"payload\.x\.id: 'nope' is not a UUID"),
    (User, {"email": "a", "id": str(UUID(int=1))},
     r"payload\.x: User misses required field 'address'"),
    (Positive, {"n": 0}, r"payload\.x: Positive\(\.\.\.\) raised ValueError: n must be positive"),
    (Invoice, {"number": "1", "total": "x", "due": "2026-01-01"},
     r"payload\.x\.total: Input should be a valid decimal"),
    (list[Invoice], [{"number": "1", "total": "1", "due": "2026-02-30"}],
     r"payload\.x\[0\]\.due: Input should be a valid date"),
]  # fmt: skip


@pytest.mark.parametrize(("note", "value", "message"), EXTERNAL, ids=lambda x: repr(x)[:30])
def test_json_from_outside_is_checked_against_the_annotation(
    note: Any, value: Any, message: str
) -> None:
    def job(x: Any) -> None: ...

    job.__annotations__ = {"x": note}
    with pytest.raises(TypeError, match=message):
        types_of(job).dump({"x": value}, "job", external=True)


def test_external_json_is_stored_in_the_canonical_form() -> None:
    def job(when: datetime, id: UUID, amount: Decimal) -> None: ...

    stored = types_of(job).dump(
        {"when": "2026-01-01T09:00Z", "id": "{" + "A" * 32 + "}", "amount": 3}, "job", True
    )
    assert stored == {"when": "2026-01-01T09:00:00+00:00", "id": str(UUID("A" * 32)),
                      "amount": "3"}  # fmt: skip


@dataclasses.dataclass
class Unreadable:
    total: Missing  # type: ignore[name-defined]  # noqa: F821 - never defined: on purpose


def test_a_dataclass_whose_annotations_cant_be_read_is_a_configuration_error(
    queue: Queue,
) -> None:
    @queue.job()
    def settle(order: Unreadable) -> None: ...

    message = r"payload\.order of 'settle': tickq can't read the types in its annotation Unreadable"
    with pytest.raises(ConfigurationError, match=message + r" \(NameError: name 'Missing'"):
        settle.enqueue(order=Unreadable(1))


def test_a_union_of_two_typed_members_keeps_the_plain_rules(queue: Queue) -> None:
    @queue.job()
    def either(when: datetime | str) -> None: ...

    with pytest.raises(TypeError, match=r"payload\['when'\] .*datetime.*isoformat"):
        either.enqueue(when=datetime.now(UTC))  # JSON can't tell which member a string was
    either.enqueue(when="tomorrow")


# -- end to end, on SQLite and Postgres ---------------------------------------------------
def test_the_function_receives_the_annotated_types_rebuilt(queue: Queue) -> None:
    got: list[dict[str, Any]] = []

    @queue.job()
    def signup(user: User, at: datetime, amount: Decimal, plan: Plan, options: Options,
               invoice: Invoice | None = None, trees: list[Tree] | None = None,
               raw: Any = None, ctx: JobContext | None = None) -> None:  # fmt: skip
        got.append({"user": user, "at": at, "amount": amount, "plan": plan, "options": options,
                    "invoice": invoice, "trees": trees, "raw": raw})  # fmt: skip

    sent = {
        "user": USER, "at": AT, "amount": Decimal("19.90"), "plan": Plan.PRO,
        "options": {"plan": Plan.FREE, "trial_end": datetime(2026, 2, 1, tzinfo=UTC)},
        "invoice": Invoice(number="A-1", total=Decimal("19.900"), due=date(2026, 2, 1)),
        "trees": [Tree("root", [Tree("leaf")])], "raw": {"plain": [1, -0.0]},
    }  # fmt: skip
    job_id = signup.enqueue(**sent)
    signup.with_options(priority=3).enqueue(**sent)
    queue.enqueue("signup", sent)
    queue.enqueue_many([("signup", sent)])
    asyncio.run(signup.enqueue_async(**sent))
    stored = queue.get_job(job_id)
    assert stored is not None and stored.payload["at"] == "2026-10-25T02:30:00+01:00[Europe/Berlin]"
    assert stored.payload["amount"] == "19.90" and stored.payload["plan"] == 2
    assert queue.process_jobs()["succeeded"] == 5
    for one in got:
        assert repr(one) == repr(sent)  # the same values, types, digits, offset and fold
        assert one["at"].tzinfo is BERLIN and one["at"].fold == 1
        assert type(one["user"].address.since) is date and one["plan"] is Plan.PRO


def test_an_async_job_receives_its_types_too(queue: Queue) -> None:
    got: list[Any] = []

    @queue.job()
    async def remind(when: datetime, ids: list[UUID]) -> None:
        got.append((when, ids))

    remind.enqueue(when=AT, ids=[UUID(int=3)])
    queue.process_jobs()
    assert got == [(AT, [UUID(int=3)])] and got[0][0].tzinfo is BERLIN


def test_a_bad_value_stores_nothing(queue: Queue) -> None:
    @queue.job()
    def charge(amount: Decimal) -> None: ...

    with pytest.raises(TypeError, match=r"^payload\.amount: expected Decimal, got float 9\.99"):
        charge.enqueue(amount=9.99)
    with pytest.raises(TypeError, match=r"payload\.amount"):
        queue.enqueue_many([("charge", {"amount": Decimal(1)}), ("charge", {"amount": 1.5})])
    assert queue.stats().get("pending", 0) == 0


def test_a_stored_value_that_no_longer_fits_fails_alone_without_retries(queue: Queue) -> None:
    ran: list[Any] = []

    @queue.job(max_attempts=5)
    def ship(address: Address) -> None:
        ran.append(address)

    bad, good = ship.enqueue(address=Address("Rome")), ship.enqueue(address=Address("Oslo"))
    raw_sql(queue, "UPDATE tickq_jobs SET payload = ? WHERE id = ?",
            '{"address": {"town": "Rome"}}', bad)  # fmt: skip
    queue.process_jobs()
    job = queue.get_job(bad)
    assert job is not None and job.status is JobState.FAILED and job.attempts == 1
    assert job.last_error is not None and job.last_error.startswith(
        "UnrunnableJob: payload.address: Address has no field 'town'; remove it (job 'ship')"
    )
    assert ran == [Address("Oslo")] and queue.get_job(good).status is JobState.DONE  # type: ignore[union-attr]


def test_a_webhook_event_is_checked_and_rebuilt(queue: Queue) -> None:
    got: list[Invoice] = []
    secret = "s3cret"

    @queue.webhook("/hooks/billing", verify=HMAC(secret, header="X-Sig", id_field="number"))
    def billed(event: Invoice) -> None:
        got.append(event)

    def post(base: str, event: dict[str, Any]) -> httpx.Response:
        body = json.dumps(event).encode()
        sig = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return httpx.post(base + "/hooks/billing", content=body, headers={"x-sig": sig}, timeout=30)

    with serving(queue.asgi_app()) as base:
        ok = post(base, {"number": "7", "total": "12.30", "due": "2026-03-01"})
        bad = post(base, {"number": "8", "total": "12.30", "due": "soon"})
    assert ok.status_code == 200, ok.text
    assert bad.status_code == 400 and "payload.event.due: Input should be a valid date" in bad.text
    queue.process_jobs()
    assert got == [Invoice(number="7", total=Decimal("12.30"), due=date(2026, 3, 1))]


def test_import_tickq_and_a_plain_job_import_no_typing_or_pydantic(tmp_path: Path) -> None:
    script = (
        "import sys\nimport tickq\n"
        f"q = tickq.Queue('sqlite:///{tmp_path / 'q.db'}'); q.migrate()\n"
        "@q.job()\ndef plain(n: int, note: 'str | None' = None, **rest): pass\n"
        "plain.enqueue(n=1, note='x'); print('typing' in sys.modules); q.process_jobs()\n"
        "print(sorted({'dataclasses', 'pydantic', 'decimal', 'uuid'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=tickq_env(), timeout=60, check=True)  # fmt: skip
    assert out.stdout.split() == ["False", "[]"], out.stderr  # (running a job imports typing)


APP = """
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from tickq import Queue

q = Queue({url!r})


@dataclass
class Order:
    id: int
    total: Decimal


@q.job()
def ship(order: Order, by: datetime) -> None:
    with open({out!r}, "a") as f:
        f.write(repr((order, by)) + "\\n")
"""


@pytest.mark.timeout(120)
def test_the_cli_enqueues_json_checked_against_the_annotations_and_a_worker_runs_it(
    db_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    (tmp_path / "shipapp.py").write_text(APP.format(url=db_url, out=str(out)))
    env = {**tickq_env(), "PYTHONPATH": f"{tmp_path}:{tickq_env().get('PYTHONPATH', '')}"}

    def tickq(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tickq", *args], input=stdin, env=env,
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)  # fmt: skip

    assert tickq("migrate", "shipapp:q").returncode == 0
    good = '{"order": {"id": 7, "total": "10.50"}, "by": "2026-05-01T17:00:00+02:00"}'
    made = tickq("enqueue", "shipapp:q", "ship", good)
    assert made.returncode == 0 and made.stdout.strip() == "1", made.stderr
    piped = tickq("enqueue", "shipapp:q", "ship", "-", stdin=good)
    assert piped.returncode == 0 and piped.stdout.strip() == "2", piped.stderr
    bad = tickq("enqueue", "shipapp:q", "ship", '{"order": {"id": 7, "total": 10.5}, "by": "x"}')
    assert bad.returncode == 1 and bad.stderr.startswith(
        "tickq: error: payload.order.total: expected a decimal number as a string"
    ), bad.stderr
    with WorkerProcess(app="shipapp:q", PYTHONPATH=env["PYTHONPATH"]) as worker:
        done = eventually(lambda: out.exists() and len(out.read_text().splitlines()) == 2,
                          what="the worker to run both jobs")  # fmt: skip
        worker.send(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    expected = ("(Order(id=7, total=Decimal('10.50')), datetime.datetime(2026, 5, 1, 17, 0, "
                "tzinfo=datetime.timezone(datetime.timedelta(seconds=7200))))")  # fmt: skip
    assert done and out.read_text().splitlines() == [expected, expected]
