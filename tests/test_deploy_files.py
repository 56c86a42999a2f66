"""The deployment files (Procfile, Dockerfile, docker-compose.yml) hang together (C9).

No Docker engine runs in CI, so the compose file is checked by parsing it: each test is one thing
a deployer would otherwise find out only when `docker compose up` or a release fails.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from models.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

# The `jobpost` subcommands the deployment files may use. Another test checks these against the
# real command line, so a renamed command cannot leave a Procfile or compose file behind.
JOBPOST_SUBCOMMANDS = frozenset({"db upgrade", "serve", "worker", "beat", "bounces", "queues"})

SERVICES = frozenset(
    {
        "postgres",
        "redis",
        "migrate",
        "nginx",
        "web",
        "worker",
        "beat",
        "bounces",
        "flower",
        "mailpit",
    }
)
APP_SERVICES = ("migrate", "web", "worker", "beat", "bounces")
APP_ENV = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "REDIS_URL",
    "SMTP_HOST",
    "SMTP_PORT",
    "MAIL_FROM",
    "JOBPOST_TIMEZONE",
    "PUBLIC_BASE_URL",
    "PROMETHEUS_MULTIPROC_DIR",
    "WORKER_METRICS_PORT",
)
# Variables every process must agree on: web enqueues what the worker consumes, both in one db.
SHARED_ENV = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "JOBPOST_TIMEZONE")
# Services that run once and exit; only these can satisfy service_completed_successfully.
ONE_SHOT_SERVICES = frozenset({"migrate"})
PROCFILE_TYPES = frozenset({"web", "worker", "beat"})
PROCFILE_OPTIONAL_TYPES = frozenset({"release", "bounces"})
MAILPIT_DEFAULT_SMTP_PORT = 1025
WEB_PORT = 8000

URL_PORT = re.compile(r"https?://[^/:\s'\"]+:(\d+)")
LOCKED_INSTALL = re.compile(r"\bpip install\b[^&;]*--require-hashes[^&;]*-r requirements\.txt\b")
PACKAGE_ALONE = re.compile(r"\bpip install\b[^&;]*--no-deps[^&;]*\s\.(\s|$)")


# --- helpers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    with (ROOT / "docker-compose.yml").open(encoding="utf-8") as f:
        data = yaml.safe_load(f)
    assert isinstance(data, dict), "docker-compose.yml must be a YAML mapping"
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = compose.get("services")
    assert isinstance(found, dict), "docker-compose.yml has no `services:` mapping"
    return found


def argv(command: str | list[Any] | None) -> list[str]:
    """A compose `command` or healthcheck `test` as an argument list."""
    if command is None:
        return []
    if isinstance(command, str):
        return shlex.split(command)
    return [str(part) for part in command]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, in either the mapping or the `KEY=value` list syntax."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Target service -> condition, in either the list or the long syntax."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def healthcheck_enabled(service: dict[str, Any]) -> bool:
    check = service.get("healthcheck")
    if not check or check.get("disable"):
        return False
    return argv(check.get("test"))[:1] != ["NONE"]


def healthcheck_text(service: dict[str, Any]) -> str:
    return " ".join(argv((service.get("healthcheck") or {}).get("test")))


def option(args: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` in an argument list."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def jobpost_subcommand(args: list[str]) -> str | None:
    """`db upgrade` for `jobpost db upgrade --json`; None when the command is not jobpost."""
    if not args or Path(args[0]).name != "jobpost":
        return None
    words = []
    for arg in args[1:]:
        if arg.startswith("-"):
            break
        words.append(arg)
    return " ".join(words)


def published_ports(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> published host port, from the short or the long `ports` syntax."""
    result = {}
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            if entry.get("published") is not None:
                result[int(entry["target"])] = int(entry["published"])
            continue
        parts = str(entry).split("/", 1)[0].split(":")
        if len(parts) >= 2:
            result[int(parts[-1])] = int(parts[-2])
    return result


def named_volumes(service: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(volume name, mount point) for each named volume a service mounts (not bind mounts)."""
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            if entry.get("type", "volume") == "volume" and entry.get("source"):
                yield entry["source"], entry["target"]
            continue
        parts = str(entry).split(":")
        if len(parts) >= 2 and not parts[0].startswith(("/", ".", "~", "$")):
            yield parts[0], parts[1]


def procfile() -> dict[str, str]:
    processes: dict[str, str] = {}
    for number, line in enumerate((ROOT / "Procfile").read_text("utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_-]+):\s*(.+)", line.strip())
        assert match, f"Procfile line {number} is not `type: command`: {line!r}"
        name, command = match.groups()
        assert name not in processes, f"Procfile declares the process type {name!r} twice"
        processes[name] = command
    return processes


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    instructions = []
    pending = ""
    for line in (ROOT / "Dockerfile").read_text("utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def docker_args(text: str) -> list[str]:
    """Arguments of CMD/RUN/HEALTHCHECK CMD in exec (JSON) or shell form."""
    if text.startswith("["):
        return [str(part) for part in json.loads(text)]
    return shlex.split(text)


def dockerfile_values(keyword: str) -> list[str]:
    return [rest for name, rest in dockerfile() if name == keyword]


def dockerfile_copied() -> set[str]:
    """The build-context paths the Dockerfile COPYs (sources only, not destinations)."""
    copied = set()
    for text in dockerfile_values("COPY"):
        args = [arg for arg in docker_args(text) if not arg.startswith("--")]
        copied |= {arg.rstrip("/").removeprefix("./") for arg in args[:-1]}
    return copied


# --- docker-compose.yml ------------------------------------------------------------------------


def test_compose_uses_the_compose_spec_without_a_version_key(compose: dict[str, Any]) -> None:
    assert "version" not in compose, (
        "docker-compose.yml has a `version:` key; the compose spec ignores it and Docker warns"
    )


def test_compose_defines_every_service_of_the_production_shape(
    services: dict[str, dict[str, Any]],
) -> None:
    missing = SERVICES - services.keys()
    assert not missing, f"docker-compose.yml lacks the services {sorted(missing)}"


def test_every_service_has_an_image_or_a_build(services: dict[str, dict[str, Any]]) -> None:
    without = [name for name, svc in services.items() if not (svc.get("image") or svc.get("build"))]
    assert not without, f"services with neither `image` nor `build` cannot start: {without}"


def test_every_dependency_exists_and_can_satisfy_its_condition(
    services: dict[str, dict[str, Any]],
) -> None:
    problems = []
    for name, svc in services.items():
        for target, condition in depends_on(svc).items():
            if target not in services:
                problems.append(f"{name} depends on {target!r}, which is not a service")
            elif condition == "service_healthy" and not healthcheck_enabled(services[target]):
                problems.append(
                    f"{name} waits for {target} to be healthy, but {target} has no health check"
                )
            elif condition == "service_completed_successfully" and target not in (
                ONE_SHOT_SERVICES
            ):
                problems.append(
                    f"{name} waits for {target} to complete, but {target} is a long-running service"
                )
            elif condition not in {
                "service_started",
                "service_healthy",
                "service_completed_successfully",
            }:
                problems.append(f"{name} depends on {target} with unknown condition {condition!r}")
    assert not problems, "; ".join(problems)


def test_one_shot_services_are_not_restarted(services: dict[str, dict[str, Any]]) -> None:
    for name in ONE_SHOT_SERVICES:
        assert str(services[name].get("restart", "no")) == "no", (
            f"{name} runs once; a restart policy would rerun it forever and never 'complete'"
        )


def test_app_services_wait_for_the_database_broker_and_migrations(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in ("web", "worker", "beat"):
        deps = depends_on(services[name])
        assert deps.get("postgres") == "service_healthy", f"{name} must wait for postgres healthy"
        assert deps.get("redis") == "service_healthy", f"{name} must wait for redis healthy"
        assert deps.get("migrate") == "service_completed_successfully", (
            f"{name} must start only after `jobpost db upgrade` has succeeded"
        )
    assert depends_on(services["migrate"]).get("postgres") == "service_healthy", (
        "migrate must wait for postgres to accept connections"
    )


def test_every_health_check_has_a_test(services: dict[str, dict[str, Any]]) -> None:
    for name, svc in services.items():
        check = svc.get("healthcheck")
        if check is None or check.get("disable"):
            continue
        args = argv(check.get("test"))
        assert args, f"{name}'s healthcheck has no `test`"
        assert args[0] in {"CMD", "CMD-SHELL", "NONE"} or isinstance(check["test"], str), (
            f"{name}'s healthcheck test must start with CMD or CMD-SHELL, got {args[0]!r}"
        )
        assert len(args) > 1 or args[0] == "NONE", f"{name}'s healthcheck test runs nothing"


def test_services_built_here_replace_the_images_web_health_check(
    services: dict[str, dict[str, Any]],
) -> None:
    # The Dockerfile's HEALTHCHECK polls the web port; inherited by worker, beat or migrate it
    # would mark them unhealthy forever.
    built = {svc.get("image") for svc in services.values() if svc.get("build")}
    for name, svc in services.items():
        if not svc.get("build") and svc.get("image") not in built:
            continue
        args = argv(svc.get("command"))
        if jobpost_subcommand(args) == "serve" and option(args, "--port") == str(WEB_PORT):
            continue
        assert "healthcheck" in svc, (
            f"{name} is built from the Dockerfile but serves no port {WEB_PORT}: give it its own "
            "healthcheck or `disable: true`"
        )


def test_app_services_have_the_configuration_they_need(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in APP_SERVICES:
        env = environment(services[name])
        missing = [key for key in APP_ENV if not env.get(key)]
        assert not missing, f"{name} lacks the environment variables {missing}"
    for key in SHARED_ENV:
        values = {name: environment(services[name]).get(key) for name in APP_SERVICES}
        assert len(set(values.values())) == 1, f"app services disagree on {key}: {values}"


def test_the_app_services_run_one_image_built_once(services: dict[str, dict[str, Any]]) -> None:
    """One `image:` for the four: `docker compose up --build` builds it once (a service that
    names the image another builds is neither built nor pulled), and every process runs the
    same code. A second `build:` would build, and export, the same image again."""
    images = {name: services[name].get("image") for name in APP_SERVICES}
    assert len(set(images.values())) == 1 and None not in images.values(), (
        f"the app services must share one `image:`: {images}"
    )
    image = images["migrate"]
    builders = [name for name, svc in services.items() if svc.get("build")]
    assert [name for name in builders if services[name].get("image") == image] == builders, (
        f"every `build:` must make {image}: {builders}"
    )
    assert len(builders) == 1, f"{image} must be built by one service, not {builders}"
    others = [n for n, svc in services.items() if svc.get("image") == image]
    assert sorted(others) == sorted(APP_SERVICES), f"{image} is run by {others}"


def test_the_app_services_read_the_secret_key_from_a_compose_secret(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    """JOBPOST_SECRET_KEY_FILE names the file compose mounts (`/run/secrets/<name>`), the key
    is in no environment, and the file holds a key the settings accept."""
    declared = compose.get("secrets") or {}
    for name in APP_SERVICES:
        env = environment(services[name])
        assert "JOBPOST_SECRET_KEY" not in env, f"{name} has the key in its environment"
        path = env.get("JOBPOST_SECRET_KEY_FILE", "")
        secret = path.removeprefix("/run/secrets/")
        assert path.startswith("/run/secrets/") and secret in declared, (
            f"{name}'s JOBPOST_SECRET_KEY_FILE={path!r} is not a declared compose secret"
        )
        mounted = [s if isinstance(s, str) else s.get("source") for s in services[name]["secrets"]]
        assert secret in mounted, f"{name} does not mount the secret {secret!r}"
    key_file = ROOT / declared[secret]["file"]
    settings = Settings.from_env({"JOBPOST_SECRET_KEY_FILE": str(key_file)})
    assert settings.secret_key


def test_database_url_reaches_the_postgres_service_with_its_credentials(
    services: dict[str, dict[str, Any]],
) -> None:
    pg = environment(services["postgres"])
    for name in APP_SERVICES:
        url = urlsplit(environment(services[name])["DATABASE_URL"])
        assert url.scheme in {"postgres", "postgresql", "postgresql+psycopg"}, (
            f"{name}'s DATABASE_URL must be a PostgreSQL URL, got scheme {url.scheme!r}"
        )
        assert url.hostname == "postgres" and url.hostname in services, (
            f"{name}'s DATABASE_URL must name the postgres service as host, got {url.hostname!r}"
        )
        assert url.port in {None, 5432}, f"{name}'s DATABASE_URL uses port {url.port}, not 5432"
        assert (url.username, url.password) == (pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"]), (
            f"{name}'s DATABASE_URL credentials differ from the postgres service's"
        )
        assert url.path == "/" + pg["POSTGRES_DB"], (
            f"{name}'s DATABASE_URL database {url.path!r} is not POSTGRES_DB {pg['POSTGRES_DB']!r}"
        )


def test_broker_and_rate_limit_store_are_the_redis_service(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in APP_SERVICES:
        env = environment(services[name])
        for key in ("CELERY_BROKER_URL", "REDIS_URL"):
            url = urlsplit(env[key])
            assert url.scheme == "redis", f"{name}'s {key} must be a redis:// URL, got {env[key]!r}"
            assert url.hostname == "redis" and url.hostname in services, (
                f"{name}'s {key} must name the redis service as host, got {url.hostname!r}"
            )
            assert url.port in {None, 6379}, f"{name}'s {key} uses port {url.port}, not 6379"


def test_mail_goes_to_the_mailpit_service_on_its_smtp_port(
    services: dict[str, dict[str, Any]],
) -> None:
    bind = environment(services["mailpit"]).get("MP_SMTP_BIND_ADDR", "")
    smtp_port = int(bind.rsplit(":", 1)[1]) if ":" in bind else MAILPIT_DEFAULT_SMTP_PORT
    for name in APP_SERVICES:
        env = environment(services[name])
        assert env["SMTP_HOST"] == "mailpit", (
            f"{name}'s SMTP_HOST must be the mailpit service, got {env['SMTP_HOST']!r}"
        )
        assert int(env["SMTP_PORT"]) == smtp_port, (
            f"{name}'s SMTP_PORT {env['SMTP_PORT']} is not mailpit's SMTP port {smtp_port}"
        )


def test_redis_keeps_queued_work_across_restarts_and_never_evicts_it(
    services: dict[str, dict[str, Any]],
) -> None:
    args = argv(services["redis"].get("command"))
    assert option(args, "--appendonly") == "yes", (
        "redis must run with `--appendonly yes`, or queued tasks are lost on restart"
    )
    assert option(args, "--maxmemory-policy") == "noeviction", (
        "redis must run with `--maxmemory-policy noeviction`, or it may drop queued tasks"
    )


def test_stateful_services_keep_their_data_in_volumes(
    services: dict[str, dict[str, Any]],
) -> None:
    mounts = {name: {target for _, target in named_volumes(services[name])} for name in services}
    assert "/var/lib/postgresql/data" in mounts["postgres"], (
        "postgres must keep /var/lib/postgresql/data in a named volume"
    )
    assert "/data" in mounts["redis"], "redis must keep /data (its append-only file) in a volume"


def test_every_named_volume_is_declared(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set((compose.get("volumes") or {}).keys())
    used = {volume for svc in services.values() for volume, _ in named_volumes(svc)}
    assert used <= declared, f"named volumes used but not declared: {sorted(used - declared)}"
    assert declared <= used, f"volumes declared but never mounted: {sorted(declared - used)}"


def test_beat_runs_exactly_one_replica(services: dict[str, dict[str, Any]]) -> None:
    beat = services["beat"]
    assert (beat.get("deploy") or {}).get("replicas") == 1, (
        "beat must declare `deploy: {replicas: 1}`: two schedulers enqueue every task twice"
    )
    assert beat.get("scale", 1) == 1, "beat must not be scaled beyond one replica"


def test_web_serves_the_port_it_checks_and_publishes_none(
    services: dict[str, dict[str, Any]],
) -> None:
    """Clients reach web through nginx only (issue 27): a published gunicorn port would let
    a slow client hold a sync worker."""
    web = services["web"]
    args = argv(web.get("command"))
    assert jobpost_subcommand(args) == "serve", "web must run `jobpost serve`"
    assert option(args, "--host") == "0.0.0.0", "web must listen on 0.0.0.0 inside its container"
    port = option(args, "--port")
    assert port == str(WEB_PORT), f"web serves on {port}, expected {WEB_PORT}"
    assert not web.get("ports"), "web must publish no port: nginx is the way in"
    check = healthcheck_text(web)
    assert "/healthz" in check, "web's healthcheck must poll /healthz"
    assert URL_PORT.findall(check) == [port], "web's healthcheck polls another port than it serves"


def test_worker_health_check_polls_its_metrics_port(services: dict[str, dict[str, Any]]) -> None:
    worker = services["worker"]
    port = environment(worker)["WORKER_METRICS_PORT"]
    check = healthcheck_text(worker)
    assert URL_PORT.findall(check) == [port], (
        f"worker's healthcheck must poll WORKER_METRICS_PORT {port}: {check!r}"
    )
    exposed = {str(entry).split("/", 1)[0] for entry in worker.get("expose") or []}
    assert port in exposed, f"worker must expose its metrics port {port} for Prometheus"


def test_flower_watches_the_same_broker_as_the_app(services: dict[str, dict[str, Any]]) -> None:
    flower = services["flower"]
    broker = option(argv(flower.get("command")), "--broker")
    assert broker, "flower's command must pass --broker"
    assert urlsplit(broker).hostname == "redis", f"flower's broker host is not redis: {broker}"
    app_broker = environment(services["worker"])["CELERY_BROKER_URL"]
    assert broker == app_broker, f"flower watches {broker}, the workers use {app_broker}"
    assert depends_on(flower).get("redis") == "service_healthy", "flower must wait for redis"


def test_nginx_publishes_the_api_and_proxies_to_web_with_the_shipped_config(
    services: dict[str, dict[str, Any]],
) -> None:
    nginx = services["nginx"]
    assert published_ports(nginx).get(WEB_PORT) == WEB_PORT, f"nginx must publish {WEB_PORT}"
    mounts = [str(entry).split(":") for entry in nginx.get("volumes") or []]
    assert ["./deploy/nginx.conf", "/etc/nginx/nginx.conf", "ro"] in mounts
    config = (ROOT / "deploy" / "nginx.conf").read_text("utf-8")
    assert re.search(rf"^\s*listen {WEB_PORT};", config, re.MULTILINE)
    assert re.search(rf"^\s*server web:{WEB_PORT};", config, re.MULTILINE)
    assert depends_on(nginx).get("web") == "service_healthy"
    assert "/healthz" in healthcheck_text(nginx)


def test_web_trusts_the_proxy_in_front_for_client_addresses(
    services: dict[str, dict[str, Any]],
) -> None:
    """The apply rate limit counts the address nginx appends, not nginx's own (C9)."""
    import ipaddress

    trusted = environment(services["web"]).get("TRUSTED_PROXIES", "")
    networks = [ipaddress.ip_network(entry) for entry in trusted.split(",") if entry]
    assert networks, "web behind nginx must set TRUSTED_PROXIES"
    assert all(network.is_private for network in networks), networks


# --- Procfile ----------------------------------------------------------------------------------


def test_procfile_declares_the_production_process_types() -> None:
    types = set(procfile())
    assert types >= PROCFILE_TYPES, f"Procfile lacks the process types {PROCFILE_TYPES - types}"
    extra = types - PROCFILE_TYPES - PROCFILE_OPTIONAL_TYPES
    assert not extra, f"Procfile has unexpected process types {sorted(extra)}"


def test_procfile_commands_run_jobpost() -> None:
    for name, command in procfile().items():
        assert command.startswith("jobpost "), f"Procfile {name} does not run jobpost: {command!r}"


def test_procfile_web_listens_on_the_platform_port() -> None:
    args = shlex.split(procfile()["web"])
    assert jobpost_subcommand(args) == "serve", "Procfile web must run `jobpost serve`"
    assert option(args, "--host") == "0.0.0.0", "Procfile web must listen on 0.0.0.0"
    assert (option(args, "--port") or "").startswith(("$PORT", "${PORT")), (
        "Procfile web must bind the port the platform assigns in $PORT"
    )


def test_procfile_release_runs_the_migrations() -> None:
    release = procfile().get("release")
    if release is not None:
        assert jobpost_subcommand(shlex.split(release)) == "db upgrade", (
            "the release phase must run `jobpost db upgrade`"
        )


# --- jobpost commands used anywhere --------------------------------------------------------------


def _jobpost_commands() -> Iterator[tuple[str, str | None]]:
    for name, command in procfile().items():
        yield f"Procfile {name}", jobpost_subcommand(shlex.split(command))
    for text in dockerfile_values("CMD"):
        sub = jobpost_subcommand(docker_args(text))
        if sub is not None:
            yield "Dockerfile CMD", sub
    with (ROOT / "docker-compose.yml").open(encoding="utf-8") as f:
        for name, svc in yaml.safe_load(f)["services"].items():
            sub = jobpost_subcommand(argv(svc.get("command")))
            if sub is not None:
                yield f"compose {name}", sub


def test_deploy_files_use_only_known_jobpost_commands() -> None:
    used = list(_jobpost_commands())
    assert used, "no jobpost command found in the deployment files"
    unknown = [f"{where}: jobpost {sub}" for where, sub in used if sub not in JOBPOST_SUBCOMMANDS]
    assert not unknown, f"unknown jobpost subcommands (known: {sorted(JOBPOST_SUBCOMMANDS)}): " + (
        "; ".join(unknown)
    )


# --- Dockerfile --------------------------------------------------------------------------------


def test_dockerfile_builds_on_python_311() -> None:
    bases = dockerfile_values("FROM")
    assert bases, "Dockerfile has no FROM"
    assert bases[-1].split()[0].startswith("python:3.11"), (
        f"the final stage must be FROM python:3.11*, got {bases[-1]!r}"
    )


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = dockerfile_values("USER")
    assert users, "Dockerfile has no USER: the processes would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, f"the last USER is root ({users[-1]!r})"


def test_dockerfile_installs_the_package_with_pip() -> None:
    runs = dockerfile_values("RUN")
    assert any(re.search(r"\bpip install\b[^&;]*\s\.(\s|$)", run) for run in runs), (
        "Dockerfile must `pip install .` the project, so the `jobpost` console script exists"
    )


def test_dockerfile_installs_the_locked_dependencies_and_then_the_package_alone() -> None:
    """The image's dependencies are requirements.txt's (written by `make lock`), each file
    checked against its hash; the package comes after, with nothing more (issue 14)."""
    runs = dockerfile_values("RUN")
    locked = [i for i, run in enumerate(runs) if LOCKED_INSTALL.search(run)]
    package = [i for i, run in enumerate(runs) if PACKAGE_ALONE.search(run)]
    assert locked, "Dockerfile must `pip install --require-hashes -r requirements.txt`"
    assert package, "Dockerfile must `pip install --no-deps .`: its dependencies are locked"
    assert locked[0] <= package[0], "the locked dependencies go in before the package"
    assert "requirements.txt" in dockerfile_copied()


def test_dockerfile_copies_what_the_package_build_needs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    setuptools = project["tool"]["setuptools"]
    needed = {"pyproject.toml", project["project"]["readme"]}
    needed |= {f"{module}.py" for module in setuptools.get("py-modules", [])}
    needed |= {pattern.rstrip("*") for pattern in setuptools["packages"]["find"]["include"]}
    copied = dockerfile_copied()
    assert needed <= copied, f"`pip install .` in the image needs {sorted(needed - copied)}"
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    excluded = [path for path in copied for pat in ignored if fnmatch.fnmatch(path, pat)]
    assert not excluded, f".dockerignore excludes files the Dockerfile copies: {excluded}"


def test_files_the_dockerfile_copies_exist() -> None:
    copied = dockerfile_copied()
    absent = [path for path in sorted(copied) if not (ROOT / path).exists()]
    assert not absent, f"the Dockerfile copies files missing from the repository: {absent}"


def test_dockerfile_serves_health_checks_and_exposes_the_web_port() -> None:
    exposed = {port.split("/")[0] for text in dockerfile_values("EXPOSE") for port in text.split()}
    assert str(WEB_PORT) in exposed, f"Dockerfile must EXPOSE {WEB_PORT}"
    checks = dockerfile_values("HEALTHCHECK")
    assert checks and checks[-1].split()[0] != "NONE", "Dockerfile must declare a HEALTHCHECK"
    assert "/healthz" in checks[-1], "the HEALTHCHECK must poll /healthz"
    assert URL_PORT.findall(checks[-1]) == [str(WEB_PORT)], (
        f"the HEALTHCHECK must poll port {WEB_PORT}"
    )
    cmds = dockerfile_values("CMD")
    assert cmds, "Dockerfile has no default CMD"
    args = docker_args(cmds[-1])
    assert jobpost_subcommand(args) == "serve", "the default CMD must be `jobpost serve`"
    assert option(args, "--host") == "0.0.0.0", "the default CMD must listen on 0.0.0.0"
    assert option(args, "--port") == str(WEB_PORT), f"the default CMD must serve on {WEB_PORT}"
