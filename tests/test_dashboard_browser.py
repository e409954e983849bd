"""The dashboard in real headless Chromium (Debian's, driven by Playwright) over uvicorn.

Screenshots of each page go to $TICKQ_SCREENSHOTS (e.g. docs/images) or the test's tmp dir.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dashboard_serving import serving
from tickq import FrozenClock, Queue

CHROMIUM = os.environ.get("TICKQ_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
PASSWORD = "a long browser test password"
XSS = "<script>alert(1)</script>"
WIDE = """[...document.querySelectorAll("*")]
  .filter(e => e.getBoundingClientRect().right > 380 && !e.closest(".scroll"))
  .map(e => e.tagName + "." + e.className).slice(0, 8).join(" ")"""


def _missing(problem: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{problem} (CI=true: a missing browser is a failure, not a skip)")
    pytest.skip(problem)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: pip install -e '.[test]'")
    if not shutil.which(CHROMIUM):
        _missing(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("TICKQ_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


PROVIDER = {"up": False}


@pytest.fixture
def q(frozen_queue: Queue, clock: FrozenClock) -> Iterator[Queue]:
    """A day of history (jobs done and failed each hour), then a job that failed twice."""
    queue = frozen_queue
    PROVIDER["up"] = False

    @queue.job(max_attempts=2, backoff=[0])
    def charge_card(order: int, note: str = "") -> None:
        if not PROVIDER["up"]:
            raise ConnectionError(f"payment provider unreachable for order {order}")

    @queue.job(queue="mail")
    def send_welcome_email(user_id: int) -> None:
        pass

    @queue.job(queue="media", max_attempts=1)
    def resize_image(image_id: int) -> None:
        if image_id % 7 == 0:
            raise OSError(f"image {image_id} is not a valid JPEG")

    @queue.schedule("0 9 * * 1-5", tz="Europe/Berlin")
    def morning_digest() -> None:
        pass

    now = clock.now()
    clock.set(now - timedelta(hours=20))
    for hour in range(20):
        queue.enqueue_many([("send_welcome_email", {"user_id": hour * 100 + i})
                            for i in range(4 + (hour * 7) % 9)])  # fmt: skip
        queue.enqueue_many([("resize_image", {"image_id": hour * 3 + i}) for i in range(3)])
        queue.process_jobs()
        clock.advance(hours=1)
    clock.set(now)
    queue.enqueue_many([("send_welcome_email", {"user_id": i}) for i in range(12)])
    queue.enqueue("charge_card", {"order": 1001, "note": XSS})
    queue.tick()
    queue.process_jobs()  # the second attempt (backoff 0) fails too
    queue.enqueue("send_welcome_email", {"user_id": 99}, run_after=timedelta(hours=2))
    yield queue
    PROVIDER["up"] = False


def test_log_in_see_the_failure_retry_it_and_watch_it_succeed(
    q: Queue, browser: Any, shots: Path
) -> None:
    job = q.list_jobs(status="failed", type="charge_card")[0]
    dialogs: list[str] = []
    app = q.asgi_app(dashboard={"password": PASSWORD, "refresh_seconds": 0.3})
    with serving(app) as base:
        context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme="light",
                                      timezone_id="America/New_York")  # fmt: skip
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))

        page.goto(f"{base}/tickq/")
        assert "/tickq/login" in page.url
        page.screenshot(path=shots / "dashboard-login.png")
        page.get_by_label("Dashboard password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/tickq/")
        assert page.get_by_role("heading", name="Overview").is_visible()
        assert page.get_by_role("link", name="charge_card").first.is_visible()
        page.screenshot(path=shots / "dashboard-overview.png", full_page=True)

        page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="Failed").click()
        page.get_by_role("link", name=f"Job {job.id}").click()
        page.wait_for_url(f"{base}/tickq/jobs/{job.id}")
        traceback = page.get_by_label("Traceback of attempt 2")
        assert "Traceback (most recent call last)" in traceback.inner_text()
        assert "payment provider unreachable for order 1001" in page.inner_text("main")
        assert XSS in page.get_by_label("Payload as JSON").inner_text()  # shown as text
        assert page.locator("script").count() == 1  # only the dashboard's own file
        page.screenshot(path=shots / "dashboard-job-failed.png", full_page=True)

        PROVIDER["up"] = True
        page.get_by_role("button", name=f"Retry job {job.id}").click()
        page.get_by_text("Put back to pending, due now.").wait_for()
        assert page.locator("h1 .status").inner_text() == "pending"
        assert q.process_jobs()["succeeded"] == 1
        page.locator("h1 .status-done").wait_for()  # live refresh, no reload
        assert page.get_by_role("status").filter(has_text="Updated").count() == 1
        page.screenshot(path=shots / "dashboard-job.png", full_page=True)

        page.goto(f"{base}/tickq/jobs")
        page.screenshot(path=shots / "dashboard-jobs.png", full_page=True)
        page.goto(f"{base}/tickq/schedules")
        local = r"your time: .* (03|04):00 AM \(America/New_York\)"  # 09:00 in Berlin
        assert re.search(local, page.inner_text("main"))
        assert "Europe/Berlin" in page.inner_text("main")
        page.screenshot(path=shots / "dashboard-schedules.png", full_page=True)
        context.close()
    assert dialogs == []


def test_pause_and_resume_queues_from_the_overview(q: Queue, browser: Any) -> None:
    @q.job(concurrency=2, rate_limit="100/m")
    def call_api() -> None: ...

    q.process_jobs()  # the first claim declares the limits
    q.pause("mail")
    app = q.asgi_app(dashboard={"password": PASSWORD, "refresh_seconds": 0})
    with serving(app) as base:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{base}/tickq/login")
        page.get_by_label("Dashboard password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/tickq/")
        mail = page.locator('tr[data-queue="mail"]')
        assert "paused" in mail.inner_text()
        limits = page.locator('tr[data-type="call_api"]').inner_text()
        assert "call_api" in limits and "2" in limits and "100/m" in limits
        page.get_by_role("button", name="Pause queue media").click()
        page.get_by_role("button", name="Resume queue media").wait_for()
        assert q.paused() == {"mail", "media"}
        page.get_by_role("button", name="Resume queue mail").click()
        page.get_by_role("button", name="Pause queue mail").wait_for()
        assert q.paused() == {"media"} and "paused" not in mail.inner_text()
        page.context.close()


def test_keyboard_and_phone(q: Queue, browser: Any, shots: Path) -> None:
    app = q.asgi_app(dashboard={"password": PASSWORD, "refresh_seconds": 0})
    with serving(app) as base:
        context = browser.new_context(viewport={"width": 375, "height": 740}, is_mobile=True)
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.goto(f"{base}/tickq/login")
        # The password field takes focus on arrival (autofocus), which Chromium applies a
        # moment after "load": wait for it rather than type into nothing.
        page.wait_for_function("document.activeElement && document.activeElement.id === 'password'")
        page.keyboard.type(PASSWORD)
        page.keyboard.press("Enter")
        page.wait_for_url(f"{base}/tickq/")
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.textContent") == "Skip to content"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "main"
        page.screenshot(path=shots / "dashboard-phone.png", full_page=True)
        width = page.evaluate("document.documentElement.scrollWidth")
        wide = page.evaluate(WIDE)
        assert width <= 376, f"the overview scrolls sideways on a phone ({width}px): {wide}"
        page.screenshot(path=shots / "dashboard-phone.png", full_page=True)
        page.goto(f"{base}/tickq/jobs")
        page.get_by_label("Status").select_option("failed")
        page.get_by_label("Type").press("Enter")  # Enter in a field submits the filters
        page.wait_for_url("**/tickq/jobs?status=failed*")
        links = page.get_by_role("link", name=re.compile(r"^Job \d+$"))
        assert links.count() == len(q.list_jobs(status="failed")) == 10
        context.close()


def test_a_workflow_run_seen_retried_and_cancelled_in_the_browser(
    frozen_queue: Queue, browser: Any, shots: Path
) -> None:
    from tickq import WorkflowContext

    q = frozen_queue
    api = {"down": True}

    @q.job(max_attempts=1)
    def call_api(order: int) -> str:
        if api["down"]:
            raise ConnectionError(f"the shipping API is down for order {order}")
        return "shipped"

    @q.workflow()
    def fulfil(wf: WorkflowContext, order: int, wait: bool) -> str:
        if wait:
            wf.wait_for("order.paid", key=f"order:{order}")
        return str(wf.run(call_api, order=order))

    failed, waiting = fulfil.start(order=1, wait=False), fulfil.start(order=2, wait=True)
    q.tick()
    assert q.workflow_run(failed).status == "failed"
    app = q.asgi_app(dashboard={"password": PASSWORD, "refresh_seconds": 0})
    with serving(app) as base:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(10_000)
        page.on("dialog", lambda d: d.accept())
        page.goto(f"{base}/tickq/login")
        page.get_by_label("Dashboard password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{base}/tickq/")

        nav = page.get_by_role("navigation", name="Dashboard")
        nav.get_by_role("link", name="Workflows").click()
        assert page.get_by_role("heading", name="Workflow runs").is_visible()
        assert page.get_by_role("link", name=f"Run {waiting}").is_visible()
        page.get_by_role("link", name=f"Run {failed}").click()
        page.wait_for_url(f"{base}/tickq/workflows/{failed}")
        assert "the shipping API is down for order 1" in page.inner_text("main")
        page.screenshot(path=shots / "dashboard-workflow-failed.png", full_page=True)

        api["down"] = False
        page.get_by_role("button", name=f"Retry step 0 of run {failed}").click()
        page.get_by_text("goes on once it ends").wait_for()
        q.tick()
        assert q.workflow_run(failed).status == "done"
        assert q.workflow_run(failed).result == "shipped"

        page.goto(f"{base}/tickq/workflows/{waiting}")
        assert "order.paid" in page.inner_text("main")
        page.get_by_role("button", name=f"Cancel workflow run {waiting}").click()
        page.wait_for_url(re.compile(rf".*/tickq/workflows/{waiting}.*"))
        page.locator("h1 .status").filter(has_text="cancelled").wait_for()
        assert q.workflow_run(waiting).status == "cancelled"
        page.screenshot(path=shots / "dashboard-workflow.png", full_page=True)
        context.close()
