"""The compliance bench (issue 19): what C13's rules add to the CPU of a write.

POST and PUT by referenceId of realistic bodies (bench.bodies) for jobs located in Ontario,
whose rules are the most (pay, range width, the AI and vacancy statements, Canadian
experience), by the big employer in `off` mode and in `warn` mode, alternated write by write
over five rounds on one server, the median of each mode compared. The bodies state neither
`aiScreening` nor `existingVacancy`, so in `warn` every write is checked in full and answers
with warnings. Target: the web process's CPU per request in `warn` at most 10% over `off`,
for POST and for PUT. Beside it, steadier on a shared machine: the check alone, timed in
process over the same bodies.
"""

from __future__ import annotations

import html
import json
import os
import random
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from statistics import median
from typing import Any

from sqlalchemy import text

from bench import api, bodies, report, seed, server, wrk
from bench.http import Client
from bench.options import Options
from models.core.dates import today_in
from models.core.settings import Settings
from models.db.engines import make_engine
from models.jobs import compliance
from models.jobs import rows as job_rows
from models.jobs.html import clean_description

ROUNDS = 5  # the CPU a request moves 20% between rounds on a shared machine
MODES = ("off", "warn")
MAX_OVERHEAD = 0.10  # warn's CPU per write at most 10% over off's
PUT_JOBS = 200
POST_BODIES = 20


@dataclass
class Run:
    seed: seed.Seed
    workers: int
    cpu_ms: dict[tuple[str, str], list[float]] = field(default_factory=dict)  # (write, mode)
    rps: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    load_average: list[float] = field(default_factory=list)
    check_us: float = 0.0  # compliance.findings alone, per write, in process
    seconds: float = 0.0


def run(options: Options) -> bool:
    started = time.perf_counter()
    wrk_path = wrk.ensure_installed()
    seeded = seed.ensure(options)
    key = seed.issue_key(seeded, seeded.big_employer_id)
    result = Run(seeded, server.cores(), load_average=[os.getloadavg()[0]])
    measured = api.Run(seeded, result.workers)  # what api._measure reads and notes into
    out = options.out_dir
    try:
        with server.gunicorn(seeded.url, result.workers, out / "compliance-server.log") as srv:
            client = Client(srv.base_url, key)
            was = _get(client, f"{api.API}/employer")["compliance"]
            scenarios = _scenarios(seeded, client)
            result.check_us = _check_us(scenarios)
            print(f"\n{ROUNDS} rounds, off and warn alternated per write, jobs in Ontario:")
            try:
                for number in range(ROUNDS):
                    for scenario in scenarios:
                        for mode in MODES if number % 2 == 0 else MODES[::-1]:
                            _set_mode(client, mode)
                            print(f" round {number + 1}, compliance {mode}:", flush=True)
                            m = api._measure(options, wrk_path, srv, key, scenario, measured)
                            result.cpu_ms.setdefault((scenario.name, mode), []).append(
                                m.worker_cpu_ms
                            )
                            result.rps.setdefault((scenario.name, mode), []).append(m.result.rps)
            finally:
                _set_mode(client, was)
        result.load_average.append(os.getloadavg()[0])
    finally:
        seed.remove_bench_rows(seeded, key)
    result.seconds = time.perf_counter() - started
    return _report(options, result)


def _get(client: Client, path: str) -> dict[str, Any]:
    answer = client.request("GET", path)
    if answer.status != 200:
        raise RuntimeError(f"GET {path}: {answer.status} {answer.body[:300]!r}")
    body: dict[str, Any] = answer.json()
    return body


def _set_mode(client: Client, mode: str) -> None:
    answer = client.request("PUT", f"{api.API}/employer", f'{{"compliance": "{mode}"}}')
    if answer.status != 200 or answer.json()["compliance"] != mode:
        raise RuntimeError(f"PUT /employer compliance={mode}: {answer.status} {answer.body!r}")


def _scenarios(seeded: seed.Seed, client: Client) -> list[api.Scenario]:
    """POST and PUT by referenceId, every body located in 2 or 3 Ontario cities."""
    today = today_in(Settings.from_env().timezone)
    rng = random.Random(seed.RANDOM_SEED)
    engine = make_engine(seeded.url)
    try:
        with engine.connect() as conn:
            put_ids = conn.scalars(
                text(
                    "SELECT id FROM jobs WHERE employer_id = :e AND id <= :m AND status = 'active' "
                    "AND close_date > :today AND reference_id IS NOT NULL "
                    "ORDER BY md5(id::text) DESC LIMIT :n"
                ),
                {
                    "e": seeded.big_employer_id,
                    "m": seeded.max_job_id,
                    "today": today,
                    "n": PUT_JOBS,
                },
            ).all()
            ontario = [
                {"id": i, "description": d}
                for i, d in conn.execute(
                    text(
                        "SELECT id, description FROM locations WHERE listed AND type = 'City' "
                        "AND province_code = 'ON' ORDER BY population DESC, id LIMIT 20"
                    )
                )
            ]
    finally:
        engine.dispose()
    read = [_get(client, f"{api.API}/jobs/{job_id}") for job_id in put_ids]
    shape = ("id", "publishDate", "employer", "updatedAt", "takenDown")
    put_bodies = [
        bodies.realistic(api._without(job, *shape), rng, ontario)
        | {"aiScreening": None, "existingVacancy": None}
        for _version in range(2)
        for job in read
    ]
    post_bodies = [api._without(body, "referenceId") for body in put_bodies[:POST_BODIES]]
    return [
        api.Scenario(
            api.POST,
            [wrk.Request("POST", f"{api.API}/jobs", json.dumps(b)) for b in post_bodies],
            expect=201,
        ),
        api.Scenario(
            api.PUT, [wrk.Request("PUT", f"{api.API}/jobs", json.dumps(b)) for b in put_bodies]
        ),
    ]


def _check_us(scenarios: list[api.Scenario]) -> float:
    """Microseconds of `compliance.findings` a write, over the bodies as they are stored."""
    today = today_in(Settings.from_env().timezone)
    stored = []
    for request in scenarios[0].requests:
        body = json.loads(request.body or "{}")
        stored.append(
            job_rows.StoredJob(
                id=0,
                employer_id=1,
                reference_id=None,
                title=html.escape(body["title"]),
                publish_date=today,
                close_date=today,
                confidential=False,
                auto_refresh=False,
                status="active",
                position_type_id=1,
                salary_amount=Decimal(str(body["salary"]["amount"])),
                salary_max=Decimal(str(body["salary"]["maxAmount"])),
                salary_period_id=body["salary"]["period"]["id"],
                salary_commission=False,
                description=clean_description(body["description"]),
                routing_type=1,
                application_email=None,
                application_url=None,
                ai_screening=None,
                existing_vacancy=None,
                workplace_type="onSite",
                applicant_locations="",
                taken_down=False,
                questions=None,
                language="en",
                translation_title=None,
                translation_description=None,
                version=1,
                updated_at=None,
                locations=(),
                category_ids=(),
            )
        )
    rounds = 200
    started = time.perf_counter()
    for _ in range(rounds):
        for job in stored:
            compliance.findings(job, {"ON"}, ontario25_plus=True, today=today)
    return (time.perf_counter() - started) / (rounds * len(stored)) * 1e6


def _report(options: Options, run: Run) -> bool:
    targets = []
    rows = []
    for write in (api.POST, api.PUT):
        off, warn = (median(run.cpu_ms[(write, mode)]) for mode in MODES)
        overhead = warn / off - 1
        rows.append(
            [
                write,
                *(
                    ", ".join(f"{ms:.2f}" for ms in run.cpu_ms[(write, mode)])
                    + f" (median {m:.2f})"
                    for mode, m in zip(MODES, (off, warn), strict=True)
                ),
                f"{overhead:+.1%}",
            ]
        )
        targets.append(
            report.Target(
                f"{write}: CPU per request in warn ≤ {MAX_OVERHEAD:.0%} over off",
                f"{warn:.2f} vs {off:.2f} ms = {overhead:+.1%}",
                overhead <= MAX_OVERHEAD,
            )
        )
    print(
        f"\ncompliance bench: gunicorn {run.workers} workers, wrk -c{options.connections} "
        f"-d{options.duration}s, web-process CPU ms per request in each round\n"
    )
    print(report.grid(["write", "off", "warn", "warn over off"], rows))
    print(report.targets(targets))
    print(
        f"the check alone, in process (compliance.findings over the bodies' stored form, in "
        f"Ontario): {run.check_us:.0f} µs a write"
    )
    print(f"load average {run.load_average[0]:.1f} before, {run.load_average[-1]:.1f} after")
    report.write_json(
        options.out_dir / "compliance.json",
        {
            "bench": "compliance",
            "seconds": round(run.seconds, 1),
            "load_average": run.load_average,
            "check_us": run.check_us,
            "cpu_ms": {f"{w} {m}": v for (w, m), v in run.cpu_ms.items()},
            "rps": {f"{w} {m}": v for (w, m), v in run.rps.items()},
            "targets": [asdict(t) for t in targets],
        },
    )
    return all(t.passed for t in targets)
