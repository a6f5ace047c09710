"""Ray for a process's runs: a cluster joined at an address, a Ray the caller already holds, or a local Ray that a
thread of its own starts (its start overlaps the command line's checks and the stream's load) and that every later
run of the process shares, stopped when the process exits.

Ray ties the processes it starts (GCS, raylet, workers) to the thread that started them (they die with it), so the
thread that calls `ray.init` lives until `ray.shutdown`. Starting takes about 3 s here, most of it waiting for the
raylet; stopping takes about 1 s of waiting for processes to exit, which a command line skips (`exit_now`).
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
import threading

import ray

from topo.errors import first_line, mute_native_stderr, stderr_to
from topo.spec import SpecError

QUIET = {"logging_level": logging.ERROR, "log_to_driver": False}
CONNECT_TIMEOUT_S = 3.0  # how long `check_address` waits for a Ray cluster to answer


def check_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """SpecError (one line, naming the address as given) unless a Ray cluster answers at `address` ('auto': the one
    this machine belongs to; 'local': none needed) within `timeout_s`. Given a wrong HOST:PORT, `ray.init` would
    retry for half a minute and end in a traceback; a port that accepts connections but is not Ray's is found out
    by asking it for the cluster's id."""
    from ray._private.services import canonicalize_bootstrap_address_or_die

    if address == "local":
        return
    client = address.startswith("ray://")
    target = address.split("://", 1)[1] if client else address
    if target == "auto":
        try:
            target = canonicalize_bootstrap_address_or_die(target)
        except (ValueError, ConnectionError) as exc:
            raise SpecError(f"--address {address}: {first_line(exc)}") from None
    host, colon, port = target.rpartition(":")
    if not colon or not host or not port.isdigit():
        raise SpecError(f"--address {address}: expected HOST:PORT, ray://HOST:PORT, auto or local")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise SpecError(f"--address {address}: no Ray cluster answers ({reason})") from None
    if not client:  # Ray Client's port speaks another protocol
        reason = _gcs_silent(target, timeout_s)
        if reason is not None and "token" in reason.lower():  # `ray start` turns token authentication on
            raise SpecError(f"--address {address}: the Ray cluster asks for its token: run with RAY_AUTH_MODE=token "
                            "(and RAY_AUTH_TOKEN_PATH unless the token is ~/.ray/auth_token)")
        if reason is not None:
            raise SpecError(f"--address {address}: no Ray cluster answers ({reason})")


def _gcs_silent(target: str, timeout_s: float) -> str | None:
    """None if the GCS at `target` tells its cluster id within `timeout_s`, else why not."""
    try:
        from ray._raylet import InnerGcsClient
    except ImportError:  # another Ray: leave it to ray.init
        return None
    try:
        with stderr_to(os.devnull):  # Ray's own client logs every failed try itself
            InnerGcsClient.standalone(target, None, int(timeout_s * 1000))
    except Exception as exc:  # whatever the RPC layer raises, the answer is no
        mute_native_stderr()  # its threads log their shutdown at exit
        return first_line(exc)
    return None


class Session:
    """Ray held for one run: `ready()` before the first actor, `release()` once the actors are gone, `join()` last."""

    def ready(self) -> None:
        """Block until Ray can take actors."""

    def release(self) -> None:
        """The run needs Ray no more: start stopping it if this session started it."""

    def join(self) -> None:
        """Block until what `release` began has ended."""


class Joined(Session):
    """A cluster joined at an address, and kept joined for the process's next runs: disconnecting (at exit) leaves
    it running."""

    def __init__(self, address: str) -> None:
        try:
            ray.init(address=address, **QUIET)
        except ConnectionError as exc:  # it answered the check, then went away, or is not a Ray that takes us
            raise SpecError(f"--address {address}: could not join the Ray cluster ({first_line(exc)})") from None


class LocalRay(Session):
    """A local Ray started at once by a thread that owns it, and stopped by that thread after `release`."""

    def __init__(self, options: dict | None = None) -> None:
        self._options = dict(options or {})
        self._up = threading.Event()
        self._down = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._own, name="local-ray", daemon=True)
        self._thread.start()

    def _own(self) -> None:
        from ray._private import ray_constants

        # Ray binds its servers and the metrics exporter to loopback only on a node whose address is 127.0.0.1, and
        # ray.init turns that address into the machine's outward one unless Ray runs as one machine (its own
        # default on macOS and Windows); so it does, while this local Ray starts
        cluster_mode, ray_constants.ENABLE_RAY_CLUSTER = ray_constants.ENABLE_RAY_CLUSTER, False
        try:
            ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, _node_ip_address="127.0.0.1", **QUIET,
                     **self._options)
        except BaseException as exc:  # handed to the run's thread by ready()
            self._error = exc
            self._up.set()
            return
        finally:
            ray_constants.ENABLE_RAY_CLUSTER = cluster_mode
        self._up.set()
        self._down.wait()
        ray.shutdown()

    def ready(self) -> None:
        self._up.wait()
        if self._error is not None:
            raise self._error

    def release(self) -> None:
        self._down.set()

    def join(self) -> None:
        self._down.set()
        self._thread.join()


_shared: LocalRay | None = None  # this process's own local Ray: begun ahead or by its first run, kept for the next
_shared_options: dict | None = None  # what it was started with (a run that asks for other options restarts it)


class _Borrowed(Session):
    """The process's shared local Ray lent to one run: releasing it leaves it up for the next run."""


def _start_shared(options: dict | None) -> None:
    global _shared, _shared_options
    _shared, _shared_options = LocalRay(options), dict(options or {})


def _stop_shared() -> None:
    global _shared, _shared_options
    if _shared is not None:
        _shared.join()
        _shared = _shared_options = None


atexit.register(_stop_shared)  # a process that ends normally stops its Ray (`exit_now` kills it instead)


def begin(options: dict | None = None) -> None:
    """Start the process's local Ray now, for the runs to come (the CLI calls this before it loads the stream)."""
    if _shared is None and not ray.is_initialized():
        _start_shared(options)


def begin_for(engine: str, address: str | None, metrics_port: int | None) -> None:
    """`begin` if a run of `engine` will need a local Ray (the Ray engine, no `address`), with the options its
    metrics port asks for; not if that port is taken (the run's checks then say so in one line)."""
    from topo.ray_engine.metrics import local_options, port_free

    if engine != "ray" or address or (metrics_port is not None and not port_free(metrics_port)):
        return
    begin(local_options(metrics_port))


def begun() -> bool:
    """Whether this process started a local Ray of its own (its runs share it)."""
    return _shared is not None


def abandon() -> None:
    """Stop the process's local Ray and wait for it (a process that never used it, or is done with it)."""
    _stop_shared()


def acquire(address: str | None, options: dict | None = None) -> Session:
    """Ray for a run: the process's shared local Ray (started now if none is up; restarted if the run needs other
    options, a metrics port), else the caller's own Ray, else the cluster at `address`. Runs in one process share
    one Ray: its start (about 3 s here) and stop (about 1 s) are paid once."""
    if address and _shared is not None:
        _stop_shared()  # a run that joins a cluster leaves this process's local Ray
    if not address and _shared is None and not ray.is_initialized():
        _start_shared(options)
    if not address and _shared is not None:
        if _shared_options != dict(options or {}):
            _stop_shared()
            _start_shared(options)
        _shared.ready()
        return _Borrowed()
    if ray.is_initialized():
        return Session()  # the caller's own Ray (or a cluster a run joined): left as it is
    return Joined(address)


def exit_now(status: int) -> None:
    """End the process at once with `status`, once its outputs are written, and every process its local Ray
    started with it, where `ray.shutdown` would hold the user about a second more (a joined cluster sees its driver
    leave, as at any exit)."""
    if _shared is None and not ray.is_initialized():
        return
    import psutil

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # the GCS and the raylet die with this process; the agents and workers the raylet started would outlive it
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.Error:
            pass
    os._exit(status)
