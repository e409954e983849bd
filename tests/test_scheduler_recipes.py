"""``tickq scheduler`` for Railway, Cloudflare Cron Triggers and Supabase (pg_cron +
pg_net), each checked by the real thing that runs here: TOML parsed by tomllib and the
command run by sh against a real server; the Worker's script run by Node against it; the SQL
run by Postgres against stand-ins with pg_cron's, pg_net's and Vault's signatures."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

import test_schedulers
from conftest import PG_URL, ROOT, require_postgres
from test_schedulers import (
    SECRET,
    TickServer,
    assert_called_once,
    generate,
    run_script,
    scheduler,
    script_env,
)

tick_server = test_schedulers.tick_server  # the fixture: a real HTTP server for the tick


def files(text: str) -> dict[str, str]:
    """The files of a multi-file target's output, by name."""
    parts = text.split("# ---- ")[1:]
    return {p.split(" ----\n", 1)[0]: p.split(" ----\n", 1)[1] for p in parts}


# ---- Railway ----


def test_railway_toml_parses_and_its_command_calls_the_tick(tick_server: TickServer) -> None:
    config = tomllib.loads(generate("railway"))
    deploy = config["deploy"]
    assert deploy["cronSchedule"] == "7,22,37,52 * * * *" and deploy["restartPolicyType"] == "NEVER"
    done = run_script(["sh", "-c", deploy["startCommand"]], script_env(tick_server))
    assert done.returncode == 0, done.stderr
    assert_called_once(tick_server, "railway")
    missing = run_script(
        ["sh", "-c", deploy["startCommand"]], {"PATH": script_env(tick_server)["PATH"]}
    )
    assert missing.returncode != 0 and "TICKQ_TICK_URL: is not set" in missing.stderr


def test_railway_refuses_runs_closer_than_five_minutes_and_runs_locally() -> None:
    refused = scheduler("railway", "--every", "1m")
    assert refused.returncode == 1 and "at most every 5 minutes" in refused.stderr
    local = tomllib.loads(generate("railway", "--local", "myapp.jobs:q"))
    assert local["deploy"]["startCommand"] == "tickq tick myapp.jobs:q --strict"


# ---- Cloudflare Cron Triggers ----


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is needed to run the Worker's script (apt-get install nodejs)")
    return found


RUNNER = """
import { default as worker, tick } from "./index.mjs";
const [mode, url] = process.argv.slice(2);
const env = { TICKQ_TICK_URL: url, CRON_SECRET: process.env.SECRET };
try {
  if (mode === "scheduled") await worker.scheduled({ cron: "x", scheduledTime: 0 }, env, {});
  else if (mode === "retry") console.log(JSON.stringify(await tick(env, [10, 10])));
  else await tick({});
  console.log("ok");
} catch (error) {
  console.log("threw: " + error.message);
}
"""


def run_worker(tmp_path: Path, text: str, mode: str, url: str) -> str:
    worker = files(text)["src/index.js"]
    (tmp_path / "index.mjs").write_text(worker)
    (tmp_path / "run.mjs").write_text(RUNNER)
    check = subprocess.run([node(), "--check", str(tmp_path / "index.mjs")], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert check.returncode == 0, check.stderr
    env = {"SECRET": SECRET, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([node(), str(tmp_path / "run.mjs"), mode, url], capture_output=True,
                          text=True, timeout=60, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_cloudflare_worker_calls_the_tick_on_its_cron(
    tmp_path: Path, tick_server: TickServer
) -> None:
    text = generate("cloudflare")
    wrangler = tomllib.loads(files(text)["wrangler.toml"])
    assert wrangler["triggers"]["crons"] == ["7,22,37,52 * * * *"]
    assert wrangler["main"] == "src/index.js" and wrangler["name"] == "tickq-tick"
    assert run_worker(tmp_path, text, "scheduled", tick_server.url) == "ok"
    assert_called_once(tick_server, "cloudflare")


def test_cloudflare_worker_retries_a_waking_host_but_not_a_refusal(
    tmp_path: Path,
    tick_server: TickServer,
) -> None:
    text = generate("cloudflare")
    tick_server.statuses = [503, 200]
    assert run_worker(tmp_path, text, "retry", tick_server.url).endswith("ok")
    assert len(tick_server.requests) == 2
    tick_server.requests.clear()
    tick_server.statuses = [401]
    assert run_worker(tmp_path, text, "scheduled", tick_server.url).startswith(
        "threw: the tick answered 401"
    )
    assert len(tick_server.requests) == 1, "a refusal is not retried"
    missing = run_worker(tmp_path, text, "missing", tick_server.url)
    assert missing == "threw: TICKQ_TICK_URL is not set: npx wrangler secret put TICKQ_TICK_URL"


def test_cloudflare_names_the_days_of_the_week() -> None:
    text = generate("cloudflare", "--cron", "0 9 * * 1-5")
    assert tomllib.loads(files(text)["wrangler.toml"])["triggers"]["crons"] == ["0 9 * * MON-FRI"]
    text = generate("cloudflare", "--cron", "30 6 * * 0,6")
    assert '"30 6 * * SUN,SAT"' in text


# ---- Supabase: pg_cron + pg_net ----

STAND_INS = """
create schema cron;
create table cron.job (jobname text primary key, schedule text, command text);
create function cron.schedule(job_name text, schedule text, command text) returns bigint
language sql as $$
  insert into cron.job values (job_name, schedule, command)
  on conflict (jobname) do update set schedule = excluded.schedule, command = excluded.command;
  select 1::bigint
$$;
create schema net;
create table net.requests (url text, headers jsonb, timeout_milliseconds int);
create function net.http_post(url text, body jsonb default '{}'::jsonb,
                              params jsonb default '{}'::jsonb,
                              headers jsonb default '{"Content-Type": "application/json"}'::jsonb,
                              timeout_milliseconds int default 5000) returns bigint
language sql as $$
  insert into net.requests values (url, headers, timeout_milliseconds); select 1::bigint
$$;
create schema vault;
create table vault.secrets (name text primary key, secret text);
create view vault.decrypted_secrets as select name, secret as decrypted_secret from vault.secrets;
create function vault.create_secret(new_secret text, new_name text) returns uuid
language sql as $$
  insert into vault.secrets values (new_name, new_secret); select gen_random_uuid()
$$;
"""
EXTENSIONS = ["create extension if not exists pg_cron;", "create extension if not exists pg_net;"]


@pytest.fixture
def supabase_like() -> object:
    """A fresh database with pg_cron's, pg_net's and Vault's functions (same names and
    parameters, recording their calls): the extensions themselves are not installed here."""
    require_postgres()
    import psycopg

    name = f"tickq_supa_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    conn = psycopg.connect(PG_URL.rsplit("/", 1)[0] + f"/{name}", autocommit=True)
    try:
        conn.execute(STAND_INS)
        yield conn
    finally:
        conn.close()
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_supabase_sql_schedules_a_call_with_the_token_from_vault(supabase_like: object) -> None:
    conn = supabase_like
    sql = generate("supabase", "--every", "1h")
    for line in EXTENSIONS:
        assert line in sql
        sql = sql.replace(line, "")
    conn.execute("select vault.create_secret('https://myapp.example.com', 'TICKQ_TICK_URL')")  # type: ignore[attr-defined]
    conn.execute("select vault.create_secret(%s, 'CRON_SECRET')", [SECRET])  # type: ignore[attr-defined]
    conn.execute(sql)  # type: ignore[attr-defined]
    conn.execute(sql)  # type: ignore[attr-defined]  # run again: the job is updated, not doubled
    jobs = conn.execute("select jobname, schedule, command from cron.job").fetchall()  # type: ignore[attr-defined]
    assert [(name, schedule) for name, schedule, _ in jobs] == [("tickq-tick", "7 * * * *")]
    conn.execute(jobs[0][2])  # type: ignore[attr-defined]  # what pg_cron runs at 07 past each hour
    ((url, headers, timeout),) = conn.execute("select * from net.requests").fetchall()  # type: ignore[attr-defined]
    assert url == "https://myapp.example.com/api/cron/tick?strict=1"
    assert headers == {"Authorization": f"Bearer {SECRET}",
                       "User-Agent": "tickq-scheduler/supabase"}  # fmt: skip
    assert timeout == 60000
    assert SECRET not in sql and json.dumps(SECRET) not in sql


# ---- the recipes without a configuration file (docs/schedulers.md) ----


def test_the_recipes_shell_commands_parse(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "schedulers.md").read_text()
    section = page[page.index("## More hosts and services") : page.index("## How often")]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 3, "Fly.io, Heroku and QStash recipes"
    for block in blocks:
        script = tmp_path / "recipe.sh"
        script.write_text(block)
        checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert checked.returncode == 0, f"{block}\n{checked.stderr}"
    for service in ("Fly.io", "Heroku Scheduler", "cron-job.org", "EasyCron", "QStash"):
        assert service in section
