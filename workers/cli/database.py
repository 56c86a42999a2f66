"""`jobpost db upgrade` and `jobpost demo`: the database and the demo employer (C9)."""

from __future__ import annotations

import argparse

from models import employers
from models.db.unit_of_work import session_scope
from workers.cli.command import Command, out


def db_upgrade(args: argparse.Namespace, command: Command) -> int:
    from models.db.migrate import upgrade

    upgrade(command.engine)
    out(args, {"status": "ok"}, "Database is at the latest schema, reference data loaded.")
    return 0


SAMPLE_JOB = (
    '{"title": "Line Cook", "status": "active", "locations": [{"description": "Toronto, ON"}], '
    '"categories": [{"id": 12}], "positionType": {"id": 1}, '
    '"description": "<p>Join our <strong>kitchen</strong>.</p>", '
    '"applicantRoutingType": {"id": 1}, "applicationEmail": "hiring@example.com"}'
)


def demo(args: argparse.Namespace, command: Command) -> int:
    """For `make run`: a demo employer (unlimited plan) and a fresh key in var/demo-key."""
    with session_scope(command.sessions) as s:
        found = [e for e in employers.list_employers(s) if e.name == "Demo Employer"]
        employer = found[0] if found else employers.create_employer(s, "Demo Employer", "unlimited")
        issued = employers.issue_key(s, employer.id)
    path = command.settings.var_dir / "demo-key"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(issued.key + "\n")
    base = f"http://127.0.0.1:{args.port}/api/v1.1"
    key = f'-H "API-Key: $(cat {path})"'
    out(
        args,
        {"employerId": employer.id, "apiKey": issued.key},
        f"Demo employer {employer.id}; API key (also in {path}):\n  {issued.key}\n\nTry:\n"
        f"  curl -s {base}/positiontypes\n"
        f"  curl -s {key} -H 'Content-Type: application/json' -d '{SAMPLE_JOB}' {base}/jobs\n"
        f"  curl -s {key} '{base}/jobs?status=active'\n",
    )
    return 0
