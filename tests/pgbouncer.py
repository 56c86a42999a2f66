"""A private PgBouncer in front of the run's PostgreSQL (Debian's package: `make pgbouncer`),
for the tests of DATABASE_URL's `pooler` parameter (C9): absent, it skips, or fails under CI."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.harness import Program, free_port
from tests.services import missing


def binary() -> str:
    """pgbouncer's path (Debian installs it in /usr/sbin, outside a user's PATH)."""
    found = shutil.which("pgbouncer", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
    if found is None:
        missing("pgbouncer (make pgbouncer installs Debian's package)")
    return found


@contextmanager
def pgbouncer(database_url: str, *, pool_mode: str, pool_size: int = 2) -> Iterator[str]:
    """PgBouncer on a free port in front of `database_url`'s database, with `pool_size` server
    connections for any number of clients; yields the URL through it, whose `pooler` says
    `pool_mode`, as an operator's DATABASE_URL would."""
    url = make_url(database_url)
    port = free_port()
    target = f"host={url.host or '127.0.0.1'} port={url.port or 5432} dbname={url.database}"
    target += f" user={url.username or 'postgres'}"
    if url.password:
        target += f" password={url.password}"
    with tempfile.TemporaryDirectory(prefix="pgbouncer-") as folder:
        ini, users = Path(folder) / "pgbouncer.ini", Path(folder) / "users.txt"
        users.write_text(f'"{url.username or "postgres"}" ""\n')
        ini.write_text(
            f"[databases]\n{url.database} = {target}\n\n[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\npool_mode = {pool_mode}\n"
            f"default_pool_size = {pool_size}\nmax_client_conn = 500\n"
        )
        command = [binary(), str(ini)]
        if os.geteuid() == 0:  # it refuses to run as root; it reads its files first
            command[1:1] = ["-u", "nobody"]
        log = Path(folder) / "pgbouncer.log"
        with Program(command, log, name="pgbouncer", stop_timeout=10) as program:
            program.wait_until(lambda: _listening(port), timeout=10, what=f"pgbouncer on {port}")
            pooled = url.set(port=port, host="127.0.0.1").update_query_dict({"pooler": pool_mode})
            yield pooled.render_as_string(hide_password=False)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
