"""A real HTTP(S) receiver of webhooks for the tests (C12): a server thread on a free port
that records what it is sent and answers as a test asks (a status, slowly, never, a 3xx, a
huge body, a closed connection). For HTTPS, a throwaway CA signs its certificate for
`hooks.test`; the client trusts that CA only (`Receiver.trust`)."""

from __future__ import annotations

import datetime
import http.server
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOST_NAME = "hooks.test"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Behaviour:
    """How the receiver answers the next requests; a test changes it between attempts."""

    status: int = 204
    delay: float = 0.0  # seconds before answering
    hang: bool = False  # never answer (until the server stops)
    body_bytes: int = 0  # an answer body of this many bytes (sent as fast as it can)
    drip: bool = False  # the answer's headers a byte at a time, a second apart
    close: bool = False  # close the connection without answering
    location: str | None = None


@dataclass
class Receiver:
    port: int
    scheme: str
    received: list[Received] = field(default_factory=list)
    behaviour: Behaviour = field(default_factory=Behaviour)
    sni: list[str | None] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    ca_pem: bytes = b""
    in_flight: int = 0
    most_at_once: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/hook", host: str = HOST_NAME) -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def trust(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if self.ca_pem:  # plain HTTP needs none
            context.load_verify_locations(cadata=self.ca_pem.decode())
        return context


def _handler(receiver: Receiver) -> type[http.server.BaseHTTPRequestHandler]:  # noqa: C901 (a branch per behaviour)
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            receiver.received.append(Received(self.path, dict(self.headers.items()), body))
            with receiver.lock:
                receiver.in_flight += 1
                receiver.most_at_once = max(receiver.most_at_once, receiver.in_flight)
            try:
                self._answer(receiver.behaviour)
            finally:
                with receiver.lock:
                    receiver.in_flight -= 1

        def _answer(self, b: Behaviour) -> None:
            if b.hang:
                receiver.stopping.wait(60)
                return
            if b.close:
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if b.delay:
                time.sleep(b.delay)
            if b.drip:
                for byte in f"HTTP/1.1 {b.status} OK\r\n".encode():
                    if receiver.stopping.wait(1):
                        return
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                return
            self.send_response(b.status)
            if b.location:
                self.send_header("Location", b.location)
            self.send_header("Content-Length", str(b.body_bytes))
            self.end_headers()
            chunk = b"x" * 65536
            left = b.body_bytes
            try:
                while left > 0:
                    self.wfile.write(chunk[: min(left, len(chunk))])
                    left -= len(chunk)
            except OSError:  # the client stopped reading and closed: as it should
                return

    return Handler


def _certificates(folder: Path) -> tuple[bytes, Path, Path]:
    """A CA, and a certificate it signs for HOST_NAME and 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jobpost test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    names = [x509.DNSName(HOST_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST_NAME)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    cert_file, key_file = folder / "leaf.pem", folder / "leaf.key"
    cert_file.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM), cert_file, key_file


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that resets a kept connection (the workers' client closing the ones it
        keeps, C12) ends it as clients do: no error of the receiver's to print."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@contextmanager
def receiving(folder: Path | None = None) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1: HTTPS given a `folder` for its certificate, else HTTP."""
    server = _Server(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    server.daemon_threads = True
    receiver = Receiver(server.server_address[1], "https" if folder else "http")
    server.RequestHandlerClass = _handler(receiver)
    if folder is not None:
        receiver.ca_pem, cert, key = _certificates(folder)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)

        def remember(sock: Any, name: str | None, _: Any) -> None:
            receiver.sni.append(name)

        context.sni_callback = remember
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(5)
