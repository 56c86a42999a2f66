# syntax=docker/dockerfile:1
# One image for every jobpost process: web (the default CMD), worker, beat and the
# migration job; docker-compose.yml picks the process with `command:`.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus

# A fixed numeric uid, so orchestrators that insist on runAsNonRoot can verify it.
RUN groupadd --system --gid 10001 jobpost \
 && useradd --system --uid 10001 --gid jobpost --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin jobpost

# The dependencies at the versions the suite ran on (requirements.txt, written by `make lock`,
# every file checked against its hash), in a layer of their own that a code change keeps.
WORKDIR /src
COPY requirements.txt ./
RUN pip install --no-cache-dir --require-hashes -r requirements.txt

# Then the package (and its console script `jobpost`), its dependencies already there; the
# source tree is not needed afterwards.
COPY pyproject.toml README.md beat_schedule.py ./
COPY api ./api
COPY models ./models
COPY workers ./workers
RUN pip install --no-cache-dir --no-deps . \
 && cd / && rm -rf /src

# The working directory must be writable by the app user: the defaults of C9 keep
# their files under ./var, and celery beat writes its schedule state to the cwd.
WORKDIR /app
RUN mkdir -p /app/var "$PROMETHEUS_MULTIPROC_DIR" \
 && chown -R 10001:10001 /app "$PROMETHEUS_MULTIPROC_DIR"
USER 10001:10001

EXPOSE 8000

# Only meaningful for the web process; compose overrides it for worker, beat and migrate.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

CMD ["jobpost", "serve", "--host", "0.0.0.0", "--port", "8000"]
