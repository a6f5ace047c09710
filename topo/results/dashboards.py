"""`scripts/dashboards.py`: write the Grafana dashboards and provisioning (`topo.results.grafana`), check them for
staleness, push them to a Grafana over HTTP, or render their offline PNGs from run directories
(`topo.results.render`).
"""

from __future__ import annotations

from pathlib import Path

from topo.results.grafana import (
    DASHBOARDS,
    DEFAULT_METRICS_PORT,
    PANELS,
    PROMETHEUS_URL,
    dashboard_json,
    generated_files,
    stale_files,
    write_files,
)
from topo.results.render import RunDirError, load_run, render_runs
from topo.spec import SpecError

EXIT_USAGE, EXIT_STALE = 2, 1
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "clusters" / "grafana"
TOKEN_ENV = "GRAFANA_TOKEN"


class UsageError(Exception):
    """A problem with what the user asked for; printed as one line, exit status 2."""


def build_parser():
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(message)

    p = Parser(
        prog="dashboards.py",
        description="Generate the Grafana dashboards of a running topology (grafanalib) with their provisioning "
                    "files, check that the committed ones are up to date, upload them to a Grafana server, or draw "
                    "the same panels as PNGs from run directories for users without Grafana.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        epilog=f"panels: {'; '.join(f'{s.key} ({s.title})' for s in PANELS)}. Prometheus scrapes a local run on "
               f"127.0.0.1:{DEFAULT_METRICS_PORT} and a Ray cluster (clusters/prometheus.yml); the provisioned "
               f"datasource points at {PROMETHEUS_URL}.",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 (listing the files) if the files under --out differ from a fresh "
                           "generation")
    mode.add_argument("--push", default=None, metavar="URL",
                      help=f"upload the dashboards to the Grafana server at URL (e.g. http://localhost:3000), "
                           f"overwriting ones with the same uid; the API token (service-account token) is read from "
                           f"the environment variable {TOKEN_ENV}; writes no files")
    mode.add_argument("--render", nargs="+", default=None, metavar="RUN_DIR",
                      help="draw every panel as <panel>.png into --out from these run directories' logs "
                           "(several run directories are overlaid, like selecting several runs in Grafana)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"directory to write (replaced whole; refused if it holds files this script does not "
                        f"write); default: {DEFAULT_OUT.relative_to(DEFAULT_OUT.parents[1])} for the dashboards, "
                        f"<first RUN_DIR>/dashboard for --render")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="--push: HTTP timeout of each request to Grafana")
    return p


def _owned(out: Path, names: set[str]) -> None:
    """Refuse to replace a directory holding anything but files this script writes (`names`, relative)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    if out.is_dir():
        foreign = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file()
                         and str(f.relative_to(out)) not in names)
        if foreign:
            raise UsageError(f"--out {out}: holds files this script does not write ({foreign[0]}, ...); "
                             f"choose an empty or new directory")


def _write_dir(out: Path, files: dict[str, str] | None = None, runs: list | None = None) -> list[str]:
    from topo.results.rundir import atomic_run_dir

    names = set(files) if files is not None else {f"{p.key}.png" for p in PANELS}
    _owned(out, names)
    with atomic_run_dir(out, overwrite=True) as tmp:
        if files is not None:
            write_files(tmp, files)
        else:
            render_runs(runs, tmp)
        # mkdtemp makes the directory private; Grafana (often another user, in a container) must read it
        import os

        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)
    return sorted(names)


def push(url: str, token: str, timeout: float = 10.0) -> list[str]:
    """Upload every dashboard (overwrite by uid) with grafana-client; returns the URLs Grafana reports."""
    from grafana_client import GrafanaApi

    api = GrafanaApi.from_url(url, credential=token, timeout=timeout)
    urls = []
    for spec in DASHBOARDS:
        answer = api.dashboard.update_dashboard(
            {"dashboard": dashboard_json(spec), "overwrite": True, "message": "scripts/dashboards.py"})
        urls.append(str((answer or {}).get("url", spec.uid)) if isinstance(answer, dict) else spec.uid)
    return urls


def main(argv: list[str] | None = None) -> int:
    """Entry point of scripts/dashboards.py; returns the exit status."""
    import os
    import sys
    from urllib.parse import urlparse

    try:
        args = build_parser().parse_args(argv)
        if not 0 < args.timeout < float("inf"):
            raise UsageError(f"--timeout {args.timeout:g}: must be a positive number of seconds")
        if args.push is not None:
            if args.out is not None:
                raise UsageError("--out: --push writes no files; drop --out")
            parsed = urlparse(args.push)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise UsageError(f"--push '{args.push}': expected a Grafana URL such as http://localhost:3000")
            token = os.environ.get(TOKEN_ENV, "").strip()
            if not token:
                raise UsageError(f"--push: set the environment variable {TOKEN_ENV} to a Grafana API token")
            try:
                urls = push(args.push, token, args.timeout)
            except Exception as exc:  # noqa: BLE001 - network/HTTP failures: one line, not a traceback
                detail = " ".join(str(exc).split())[:300]
                print(f"dashboards.py: error: upload to {args.push} failed: {type(exc).__name__}: {detail}",
                      file=sys.stderr)
                return EXIT_STALE
            for u in urls:
                print(f"uploaded {u}")
            return 0
        if args.render is not None:
            runs = [load_run(Path(d)) for d in args.render]
            out = Path(args.out) if args.out else Path(args.render[0]) / "dashboard"
            written = _write_dir(out, runs=runs)
            print(f"wrote {len(written)} panels to {out}")
            return 0
        out = Path(args.out) if args.out else DEFAULT_OUT
        if args.check:
            if not out.is_dir():  # a mistyped path is not "out of date"
                raise UsageError(f"--out {out}: no such directory to check")
            stale = stale_files(out)
            if stale:
                print(f"dashboards.py: {out}: out of date: {', '.join(stale)} "
                      f"(regenerate with scripts/dashboards.py --out {out})", file=sys.stderr)
                return EXIT_STALE
            print(f"{out}: up to date")
            return 0
        written = _write_dir(out, files=generated_files())
        print(f"wrote {len(written)} files to {out}")
        return 0
    except (UsageError, RunDirError, SpecError) as exc:  # SpecError: an --out that cannot be written
        print(f"dashboards.py: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
