"""The README and docs/ say what a newcomer, a caller and an operator need, and stay true (C9).

What can be checked against the code is: the settings table, the section headings every
citation needs, the problem and entry codes, the links between the pages, the Procfile advice,
and that nothing cites a file outside the repository.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from sqlalchemy import create_engine

from api import errors, gunicorn_workers
from models.core import errors as domain
from models.core.settings import VARIABLES, Settings
from tests.test_deploy_files import procfile

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")
REFERENCE = (DOCS / "reference.md").read_text(encoding="utf-8")
OPERATIONS = (DOCS / "operations.md").read_text(encoding="utf-8")

# Files a clone does not have, written so that this file does not cite them itself.
OUTSIDE = ("../" + "shared", "shared" + "/spec", "interface-v1.1" + ".md", "contract" + ".md")
# A section citation (C and a number): not a byte (%C3, \xC3), not part of a word, not C0.
CITATION = re.compile(r"(?<![%\\\w])C([1-9][0-9]?)\b")
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SECTIONS = range(1, 25)  # C1 to C24


def section(text: str, heading: str) -> str:
    """The text under `## heading`, up to the next heading of that level."""
    body = text.split(f"\n## {heading}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def tracked_files() -> list[Path]:
    """The repository's files, tracked or new but not ignored (git's list; the working tree's
    when git cannot say), less .ci."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.decode()
        paths = [ROOT / name for name in listed.split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        skip = {".git", ".venv", "var", "__pycache__", ".mypy_cache", ".ruff_cache"}
        paths = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.parts)]
    return [p for p in paths if p.is_file() and p.relative_to(ROOT).parts[0] != ".ci"]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None  # a binary file cites nothing


# --- settings (docs/operations.md) ---------------------------------------------------------------


def _table_rows() -> dict[str, str]:
    """variable → default cell, from the settings table of docs/operations.md."""
    rows = {}
    for line in section(OPERATIONS, "Settings").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3:
            for name in re.findall(r"`([A-Z_]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_every_variable_jobpost_reads_is_in_the_settings_table() -> None:
    missing = [name for name in VARIABLES if name not in _table_rows()]
    assert not missing, f"the settings table of docs/operations.md lacks {missing}"


def test_the_documented_numeric_defaults_are_the_real_ones() -> None:
    real = Settings.from_env({})
    rows = _table_rows()
    for name, value in {
        "SMTP_TIMEOUT": real.smtp_timeout,
        "APPLICATION_RETENTION_DAYS": real.application_retention_days,
        "OUTBOX_SWEEP_GRACE_SECONDS": real.outbox_sweep_grace_seconds,
        "OUTBOX_LEASE_SECONDS": real.outbox_lease_seconds,
        "DELIVERY_RETRY_BASE_SECONDS": real.delivery_retry_base_seconds,
        "DELIVERY_RETRY_HOURS": real.delivery_retry_hours,
        "READY_TIMEOUT_SECONDS": real.ready_timeout_seconds,
        "WORKER_METRICS_PORT": real.worker_metrics_port,
    }.items():
        assert rows[name] == f"`{value:g}`", f"{name}: the docs say {rows[name]}, the code {value}"


# --- the README ----------------------------------------------------------------------------------


def test_the_two_setup_commands_are_given() -> None:
    assert "make run" in README and "make test" in README


def test_the_readme_stays_a_newcomers_page() -> None:
    lines = README.count("\n")
    assert lines <= 150, f"README.md has {lines} lines: move reference material to docs/"


# --- citations ----------------------------------------------------------------------------------


def test_nothing_cites_a_file_outside_the_repository() -> None:
    """A clone has nothing beside the repository: code, tests, openapi.json and the pages cite
    docs/ instead."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {name}"
        for path in tracked_files()
        if (text := text_of(path)) is not None
        for number, line in enumerate(text.splitlines(), 1)
        for name in OUTSIDE
        if name in line
    ]
    assert not found, "cites a file outside the repository:\n" + "\n".join(found)


def section_headings() -> dict[int, list[str]]:
    """Section number → the docs pages whose headings start with it (`## C4 Writes`)."""
    headed: dict[int, list[str]] = {}
    for page in sorted(DOCS.glob("*.md")):
        for _level, title in HEADING.findall(page.read_text(encoding="utf-8")):
            if match := re.match(r"C([0-9]+)\b", title):
                headed.setdefault(int(match.group(1)), []).append(page.name)
    return headed


def test_sections_c1_to_c16_each_have_one_heading() -> None:
    headed = section_headings()
    assert sorted(headed) == list(SECTIONS), f"section headings in docs/: {sorted(headed)}"
    twice = {n: pages for n, pages in headed.items() if len(pages) > 1}
    assert not twice, f"sections headed more than once: {twice}"


def test_every_cited_section_has_a_heading_in_docs() -> None:
    """ "C4" in a comment, a test or openapi.json leads to a heading of docs/."""
    headed = section_headings()
    unresolved = sorted(
        f"C{number} in {path.relative_to(ROOT)}"
        for path in tracked_files()
        if path.parent != DOCS and (text := text_of(path)) is not None
        for number in {int(n) for n in CITATION.findall(text)}
        if number not in headed
    )
    assert not unresolved, "cited sections without a heading in docs/: " + ", ".join(unresolved)


def test_the_citation_pattern_finds_sections_and_only_sections() -> None:
    found = CITATION.findall("C4, (C9 REDIS_URL), C1/C8, C10's; not C0, %C3%A9, \\xC3, ABC1")
    assert found == ["4", "9", "1", "8", "10"]


# --- codes (docs/reference.md C1) ----------------------------------------------------------------


def answered_codes() -> set[str]:
    """Every problem `code` the service answers: its own, falcon's and gunicorn's."""
    codes = set(errors.FALCON_CODES.values())
    codes |= {code for _kind, _status, code, _detail in gunicorn_workers.REFUSALS}
    codes |= {gunicorn_workers.MALFORMED[1], gunicorn_workers.INTERNAL[1]}
    codes |= {kind.code for kind in domain.DomainError.__subclasses__()}
    for path in (ROOT / "api").glob("*.py"):
        codes |= set(re.findall(r'Problem\(\s*\d+,\s*"([a-z_]+)"', path.read_text("utf-8")))
    return codes


def entry_codes() -> set[str]:
    """Every `code` of an `errors` entry the write and application rules report."""
    call = re.compile(
        r'(?:Invalid|FieldError|fail)\(\s*[^,()]*,\s*"([a-z_]+)"|_add\(\s*"([a-z_]+)"'
    )
    codes: set[str] = set()
    for path in [*(ROOT / "api").glob("*.py"), *(ROOT / "models").rglob("*.py")]:
        codes |= {a or b for a, b in call.findall(path.read_text("utf-8"))}
    return codes


def test_the_reference_names_every_code_the_service_answers() -> None:
    codes = answered_codes() | entry_codes()
    assert {"not_found", "uri_too_long", "html_href_scheme", "below_amount"} <= codes
    missing = sorted(code for code in codes if f"`{code}`" not in REFERENCE)
    assert not missing, f"docs/reference.md does not name the codes {missing}"


# --- links --------------------------------------------------------------------------------------


def slug(title: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", r"\1", title).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_links_between_the_pages_lead_somewhere() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue  # http:, mailto:
            name, _, anchor = target.partition("#")
            linked = (page.parent / name).resolve() if name else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md":
                anchors = {slug(t) for _l, t in HEADING.findall(linked.read_text("utf-8"))}
                if anchor not in anchors:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "broken links: " + "; ".join(broken)


def test_the_slug_is_githubs() -> None:
    assert slug("C4 Job writes (POST, PUT)") == "c4-job-writes-post-put"
    assert slug("When Redis or PostgreSQL is down") == "when-redis-or-postgresql-is-down"


# --- the Procfile advice (docs/operations.md) ---------------------------------------------------


def test_the_procfile_advice_runs_the_release_step_then_the_long_running_processes() -> None:
    """honcho and foreman start `release` beside the rest and stop them all when it exits:
    the page has the release command run first, then only the other process types started."""
    processes = procfile()
    blocks = re.findall(r"```sh\n(.*?)```", OPERATIONS, re.DOTALL)
    advice = [block for block in blocks if "honcho start" in block]
    assert advice, "docs/operations.md shows no `honcho start` command"
    for block in advice:
        commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
        commands = [c for c in commands if c]
        start = next(i for i, c in enumerate(commands) if c.startswith("honcho start"))
        named = shlex.split(commands[start])[2:]
        assert named, "a bare `honcho start` also starts `release`, whose exit stops the rest"
        # `bounces` runs only with BOUNCE_DOMAIN set (C22): the page says to add it then.
        assert set(named) == set(processes) - {"release", "bounces"}, f"honcho start {named}"
        assert processes["release"] in commands[:start], (
            f"run `{processes['release']}` before starting the processes"
        )


# --- the endpoint index (docs/reference.md) ------------------------------------------------------

INDEX_ROW = re.compile(r"^\| `([A-Z]+)` \| `(/[^`]*)` \|", re.MULTILINE)


def template(path: str) -> str:
    """A path with its parameters unnamed: `/jobs/{job_id}` and `/jobs/{id}` are one path."""
    return re.sub(r"\{[^}]+\}", "{}", path)


def served_operations() -> set[tuple[str, str]]:
    """(method, path) of every route the app serves, HEAD aside (every GET answers it)."""
    import falcon.inspect

    from api.app import create_app
    from models.db.unit_of_work import make_sessionmaker

    engine = create_engine("sqlite://")  # routes only: nothing is read
    app = create_app(Settings.from_env({}), make_sessionmaker(engine, 5))
    return {
        (method.method, template(route.path))
        for route in falcon.inspect.inspect_routes(app)
        for method in route.methods
        if not method.internal and method.method != "HEAD"
    }


def indexed_operations() -> list[tuple[str, str]]:
    return [(m, template(p)) for m, p in INDEX_ROW.findall(section(REFERENCE, "Endpoints"))]


def test_the_endpoint_index_lists_every_operation_the_app_serves() -> None:
    served, indexed = served_operations(), indexed_operations()
    assert len(served) > 40, "the route scan finds the app's routes"
    missing = sorted(served - set(indexed))
    assert not missing, f"the endpoint index of docs/reference.md lacks {missing}"


def test_each_row_of_the_endpoint_index_is_a_served_operation_listed_once() -> None:
    indexed = indexed_operations()
    unknown = sorted(set(indexed) - served_operations())
    assert not unknown, f"the endpoint index lists operations the app does not serve: {unknown}"
    assert len(indexed) == len(set(indexed)), "an operation is listed twice"


def test_the_endpoint_index_and_openapi_name_the_same_operations() -> None:
    documented = {
        (method.upper(), template(path))
        for path, item in json.loads((ROOT / "api" / "openapi.json").read_text("utf-8"))[
            "paths"
        ].items()
        for method in item
        if method != "parameters"
    }
    assert set(indexed_operations()) == documented


CURL = re.compile(r"^```sh\ncurl (.*?)\n```", re.MULTILINE | re.DOTALL)


def examples() -> set[tuple[str, str]]:
    """(method, path template) of each curl example of the reference: `-X` names the method,
    else `--json` makes it a POST and nothing a GET; `$API` is `/api/v1.1`, numbers and
    message ids and percent-encoded addresses are path parameters."""
    found = set()
    for command in CURL.findall(REFERENCE):
        head = command.split("--json", 1)[0]
        method = re.search(r"-X ([A-Z]+)", head)
        url = re.search(r"\"?(\$API[^\s\"?]*|https://[^\s\"?]+)", head)
        assert url, f"an example names no URL: curl {command[:80]}"
        path = re.sub(r"^https://[^/]+", "", url[1].replace("$API", "/api/v1.1", 1))
        path = re.sub(r"/(\d+|msg_[\w-]+|[\w.+-]+%40[\w.-]+)(?=/|$)", "/{}", path)
        found.add((method[1] if method else "POST" if "--json" in command else "GET", path))
    return found


def test_every_api_operation_of_the_index_has_an_example() -> None:
    shown = examples()
    assert ("PUT", "/api/v1.1/jobs/{}") in shown, "the example scan reads the examples"
    missing = sorted(
        op for op in indexed_operations() if op[1].startswith("/api/") and op not in shown
    )
    assert not missing, f"docs/reference.md shows no request and answer for {missing}"
    unknown = sorted(shown - served_operations())
    assert not unknown, f"examples of operations the app does not serve: {unknown}"


def test_the_benchmarks_page_keeps_the_current_figures_short() -> None:
    """Issue 28: the current figures and the reasons behind the code, not a notebook; git
    keeps the history of the runs."""
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    assert "## Current figures" in page
    assert len(page.splitlines()) <= 300
