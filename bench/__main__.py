"""`python -m bench [NAME ...]` (what `make bench` runs): the named benches, or all of them."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence

from bench import alerts, api, compliance, engine, feeds, sync, upkeep, workers
from bench.options import Options

# A bench takes the options, prints its table and writes var/bench/<name>.json; it returns
# whether its targets passed. They share the seeded database (`bench.seed.ensure`), but for
# workers, which makes a small one of its own.
Bench = Callable[[Options], bool]

BENCHES: dict[str, Bench] = {
    "api": api.run,
    "compliance": compliance.run,  # C13's rules: CPU per write in warn over off (issue 19)
    # Later benches plug in here, in the order `python -m bench` runs them:
    "workers": workers.run,  # applications accepted; Celery delivery throughput
    "engine": engine.run,  # C12's delivery engine: overlapped sends to a relay with latency
    "upkeep": upkeep.run,  # expire / refresh over the seeded million
    "sync": sync.run,  # C11's sync runs against a PUT loop, on the seeded million
    "feeds": feeds.run,  # C15: the Indeed feed streamed over the seeded million, its memory
    "alerts": alerts.run,  # C19: a daily digests run over 100,000 alerts, its time and memory
}


def parser() -> argparse.ArgumentParser:
    defaults = Options.defaults()
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benches to run: {', '.join(BENCHES)} (default: all)",
    )
    p.add_argument(
        "--reseed", action="store_true", help="drop the bench database and seed it again"
    )
    p.add_argument(
        "--duration",
        type=int,
        default=defaults.duration,
        help="seconds of measured load per scenario (default %(default)s)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=defaults.warmup,
        help="seconds of load before each measurement (default %(default)s)",
    )
    p.add_argument("--threads", type=int, default=defaults.threads, help="wrk threads")
    p.add_argument(
        "--connections",
        type=int,
        default=defaults.connections,
        help="wrk connections (default %(default)s)",
    )
    p.add_argument(
        "--deliveries",
        type=int,
        default=defaults.deliveries,
        help="applications of each kind the workers bench delivers (default %(default)s)",
    )
    p.add_argument("--strict", action="store_true", help="exit with status 1 when a target fails")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHES]
    if unknown:
        p.error(f"no bench named {', '.join(unknown)} (there are: {', '.join(BENCHES)})")
    options = dataclasses.replace(
        Options.defaults(),
        reseed=args.reseed,
        duration=args.duration,
        warmup=args.warmup,
        threads=args.threads,
        connections=args.connections,
        deliveries=args.deliveries,
    )
    passed = True
    for name in args.names or list(BENCHES):
        print(f"== bench {name} ==", flush=True)
        passed = BENCHES[name](options) and passed
        options = dataclasses.replace(options, reseed=False)  # seeded once per run
    return 0 if passed or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
