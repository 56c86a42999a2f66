"""`jobpost applications export|erase --email ADDRESS`: an applicant's request for their
data, or for its erasure (C13 Privacy, C14)."""

from __future__ import annotations

import argparse

from api import representations
from models.applications import privacy
from models.core.checks import Invalid
from models.core.dates import utcnow
from models.db.unit_of_work import session_scope
from workers.cli.command import Command, out


def address(value: str) -> str:
    """argparse's type for --email: a malformed address is a usage error (exit 2)."""
    try:
        return privacy.address(value)
    except Invalid as e:
        raise argparse.ArgumentTypeError(f"{value!r} is not a valid email address") from e


def applications_export(args: argparse.Namespace, command: Command) -> int:
    """Always one JSON object: the export is the applicant's copy, not a table to read."""
    with session_scope(command.sessions) as s:
        found = representations.export(privacy.export(s, args.email))
    args.json = True
    out(args, found, "")
    return 0


def applications_erase(args: argparse.Namespace, command: Command) -> int:
    with session_scope(command.sessions) as s:
        erased = privacy.erase_address(s, args.email, now=utcnow())
    counts = erased.as_dict()
    said = ", ".join(f"{n} {what}" for what, n in counts.items())
    out(args, counts, f"Erased for {args.email}: {said}.")
    return 0
