"""`jobpost employers …` and `jobpost keys …`: employers, their plans and API keys (C2, C9)."""

from __future__ import annotations

import argparse
from typing import Any

from sqlalchemy.orm import Session

from api import representations
from models import employers, keys
from models.core.dates import utcnow
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
    """A key with every scope, or with `--scopes` and `--expires` by C23's rules."""
    with session_scope(command.sessions) as s:
        if args.scopes is None and args.expires is None:
            issued = employers.issue_key(s, args.employer_id)
            secret, key_id = issued.key, None
        else:
            body: dict[str, Any] = {"expiresAt": args.expires}
            if args.scopes is not None:
                body["scopes"] = [x.strip() for x in args.scopes.split(",") if x.strip()]
            made = keys.create(s, operator_of(s, args.employer_id), body, now=utcnow())
            secret, key_id = made.secret, made.key.id
    out(
        args,
        {"employerId": args.employer_id, "apiKey": secret, "id": key_id},
        f"API key for employer {args.employer_id} (shown once): {secret}",
    )
    return 0


def operator_of(session: Session, employer_id: int) -> employers.Access:
    """The operator acting for an employer: every scope, so it may grant any (C23)."""
    e = employers.get_employer(session, employer_id)
    return employers.Access(e.id, e.name, e.plan, e.created_at)


def keys_list(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        employers.get_employer(s, args.employer_id)
        shown = [representations.api_key(k) for k in keys.live(s, args.employer_id, now=utcnow())]
    lines = [
        f"{k['id']:>6}  {k['prefix']}  {','.join(k['scopes'])}  expires {k['expiresAt'] or 'never'}"
        f"  last used {k['lastUsedAt'] or 'never'}"
        for k in shown
    ]
    out(args, {"data": shown}, "\n".join(lines) or "no live keys")
    return 0


def keys_revoke(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        key = employers.revoke_key(s, args.prefix)
    out(args, {"prefix": key.prefix, "revoked": True}, f"Key {key.prefix} revoked.")
    return 0
