"""`jobpost employers …` and `jobpost keys …`: employers, their plans and API keys (C2, C9)."""

from __future__ import annotations

import argparse

from api import representations
from models import employers
from models.db.unit_of_work import session_scope
from workers.cli.command import Command, out


def employers_create(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        employer = employers.create_employer(s, args.name, args.plan, args.language)
        issued = employers.issue_key(s, employer.id)
    out(
        args,
        {"employerId": employer.id, "apiKey": issued.key},
        f"Employer {employer.id} ({employer.name}, {employer.plan}, {employer.language}) "
        "created.\n"
        f"API key (shown once): {issued.key}",
    )
    return 0


def employers_list(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        rows = [
            {"id": e.id, "name": e.name, "plan": e.plan, "language": e.language}
            for e in employers.list_employers(s)
        ]
    lines = [f"{r['id']:>6}  {r['plan']:<9}  {r['name']}" for r in rows]
    out(args, {"employers": rows}, "\n".join(["    id  plan       name", *lines]))
    return 0


def employers_set_plan(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        employer = employers.set_plan(s, args.id, args.plan)
    out(
        args,
        {"employerId": employer.id, "plan": employer.plan},
        f"Employer {employer.id} is now on the {employer.plan} plan.",
    )
    return 0


def employers_set(args: argparse.Namespace, command: Command) -> int:
    """`jobpost employers set ID [--language L] [--compliance M] [--ontario-25-plus yes|no]
    [--email-knocked-out yes|no]` (C13, C21): what is not given is left as it is; prints the
    employer as GET /employer does."""
    ontario = None if args.ontario25_plus is None else args.ontario25_plus == "yes"
    with session_scope(command.sessions) as s:
        if args.language is not None:
            employers.set_language(s, args.id, args.language)
        if args.email_knocked_out is not None:
            employers.update_settings(
                s, args.id, {"emailKnockedOut": args.email_knocked_out == "yes"}
            )
        employer = employers.set_compliance(
            s, args.id, mode=args.compliance, ontario25_plus=ontario
        )
        shown = representations.employer(employer)
    out(
        args,
        shown,
        f"Employer {shown['id']}: language {shown['language']}, compliance "
        f"{shown['compliance']}, 25+ employees in Ontario: "
        f"{'yes' if shown['ontario25Plus'] else 'no'}.",
    )
    return 0


def keys_create(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        issued = employers.issue_key(s, args.employer_id)
    out(
        args,
        {"employerId": issued.employer_id, "apiKey": issued.key},
        f"API key for employer {issued.employer_id} (shown once): {issued.key}",
    )
    return 0


def keys_revoke(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        key = employers.revoke_key(s, args.prefix)
    out(args, {"prefix": key.prefix, "revoked": True}, f"Key {key.prefix} revoked.")
    return 0
