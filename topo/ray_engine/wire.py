"""Frames and acks between the processes of one node over Unix sockets, as Storm's worker processes talk over
their own transport (Netty) and not through the cluster's RPC layer.

A Ray call costs about a millisecond of CPU here, split between caller and callee and spent on threads that fight
the process's scheduler for the GIL: at 8 x 64 in two processes, Ray's own threads took a quarter of each process
and a buffer's transit p99 reached 100-150 ms. A `Wire` is one process's end of a plainer path: a listening socket
in Linux's abstract namespace (nothing on disk, gone with the process), one connection to each peer process of the
same node, and one reader thread that takes every message off every connection. A source sends a frame as one
length-prefixed pickle, and asks for its acks with a poll that the peer answers on the same connection once it
has any, exactly as the `acks` long poll answers through Ray.

The wire only speeds up what Ray does: frames, polls and their answers mean the same, and a poll fails with
`WireLost` where a Ray call would fail with an actor error. A peer that dies closes its connections; until its next
incarnation tells its new address (asked through Ray), frames and polls to it go through Ray, which queues them for
the restarted actor. Peers on other nodes are always reached through Ray.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import os
import pickle
import selectors
import socket
import struct
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

FRAME, POLL, ACKS = 0, 1, 2  # message kinds: a frame of buffers, a poll for acks, a poll's answer
HEADER = struct.Struct("<Q")  # each message: its length, then its pickle
READ_BYTES = 1 << 18  # what one read takes off a connection at most
READ_WAKE_S = 1.0  # the reader looks whether its wire was closed at least this often
_UNKNOWN = object()  # a peer this process has no connection to yet


class WireLost(ConnectionError):
    """The peer process of a poll died (its connection closed) before it answered."""


def available() -> bool:
    """Whether this platform has the abstract socket namespace the wire listens on (Linux)."""
    return sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


def _same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of a Unix socket runs as this one's user."""
    try:
        _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except (OSError, AttributeError):
        return False
    return uid == os.getuid()


class _Connection:
    """One socket to or from a peer: whole messages written under a lock, read by the wire's reader thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.lock = threading.Lock()
        self.inbox = bytearray()  # read, not yet a whole message
        self.polls: dict[int, concurrent.futures.Future] = {}  # poll id -> its future (the client's side)
        self.alive = True

    def send(self, message: tuple) -> bool:
        """Write one message; False once the connection is gone (the peer died)."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            if not self.alive:
                return False
            try:
                self.sock.sendall(HEADER.pack(len(data)) + data)
            except OSError:
                return False
        return True

    def messages(self, data: bytes) -> list[tuple]:
        """The whole messages that `data`, appended to what was read before, completes."""
        inbox = self.inbox
        inbox += data
        out, at = [], 0
        while len(inbox) - at >= HEADER.size:
            (size,) = HEADER.unpack_from(inbox, at)
            if len(inbox) - at - HEADER.size < size:
                break
            start = at + HEADER.size
            out.append(pickle.loads(memoryview(inbox)[start : start + size]))
            at = start + size
        del inbox[:at]
        return out


class Wire:
    """One process's end of the data plane: it listens for peers, connects to them, and reads both.

    `on_frame(frame, sent)` takes a frame a peer's source sent; `on_poll(source, epoch)` returns the future of that
    source's acks (`outbox.Outboxes.poll`). Both are called on the reader thread."""

    def __init__(self, node: str, on_frame: Callable[[Any, float], None],
                 on_poll: Callable[[int, int], concurrent.futures.Future]) -> None:
        self.node = node
        self.on_frame, self.on_poll = on_frame, on_poll
        self.name = f"topo-wire-{uuid.uuid4().hex}"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind("\0" + self.name)  # abstract: no file, released when the process dies
        self._server.listen(64)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._server, selectors.EVENT_READ, None)
        # peer process -> the connection its sources' frames take (None: another node's, reached through Ray)
        self._peers: dict[int, _Connection | None] = {}
        self._resolving: set[int] = set()  # peers whose new address is being asked for
        self._ids = itertools.count()
        self._lock = threading.Lock()  # the peers and the selector's registrations
        self._closed = False
        threading.Thread(target=self._read_forever, name="wire", daemon=True).start()

    @property
    def address(self) -> tuple[str, str]:
        """(node id, socket name): where peers of the same node connect."""
        return self.node, self.name

    def connect(self, peer: int, address: tuple[str, str]) -> bool:
        """Reach process `peer` at `address` from now on, if it is on this node; True when connected."""
        node, name = address
        if node != self.node:
            self._peers[peer] = None
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect("\0" + name)
        except OSError:  # gone already (it died after telling its address): Ray reaches it meanwhile
            sock.close()
            return False
        connection = _Connection(sock)
        with self._lock:
            old = self._peers.get(peer)
            self._peers[peer] = connection
            self._selector.register(sock, selectors.EVENT_READ, connection)
        if old is not None:
            self._close(old)
        return True

    def peer(self, h: int, resolve: Callable[[], concurrent.futures.Future] | None = None) -> _Connection | None:
        """The live connection to process h, or None (Ray carries the message). Without one (h died, or this
        process is a new incarnation that never met it), h's address is asked for in the background: `resolve()` is
        its future (a Ray call, answered once h is up)."""
        connection = self._peers.get(h, _UNKNOWN)
        if connection is None:
            return None  # on another node: always through Ray
        if connection is not _UNKNOWN and connection.alive:
            return connection
        if resolve is not None and h not in self._resolving:
            self._resolving.add(h)
            resolve().add_done_callback(lambda answer, h=h: self._resolved(h, answer))
        return None

    def _resolved(self, h: int, answer: concurrent.futures.Future) -> None:
        self._resolving.discard(h)
        try:
            self.connect(h, answer.result())
        except Exception:  # not up, or gone again: the next message through Ray finds out, and asks again
            pass

    def send_frame(self, h: int, frame: Any, sent: float, resolve: Callable | None = None) -> bool:
        """Send a frame to process h over the wire; False when Ray must carry it."""
        connection = self.peer(h, resolve)
        return connection is not None and connection.send((FRAME, frame, sent))

    def poll(self, h: int, source: int, epoch: int,
             resolve: Callable | None = None) -> concurrent.futures.Future | None:
        """A future of `source`'s acks from process h over the wire (failing with `WireLost` if h dies first); None
        when Ray must carry the poll."""
        connection = self.peer(h, resolve)
        if connection is None:
            return None
        future: concurrent.futures.Future = concurrent.futures.Future()
        poll_id = next(self._ids)
        connection.polls[poll_id] = future
        if not connection.send((POLL, poll_id, source, epoch)):
            connection.polls.pop(poll_id, None)
            return None
        return future

    # --- the reader thread

    def close(self) -> None:
        """Stop listening and drop every connection (as the process's death would); its reader thread ends."""
        with self._lock:  # (with `_accept`: a connection accepted while closing is closed too, not kept open)
            self._closed = True
            connections = [key.data for key in self._selector.get_map().values() if key.data is not None]
        for connection in connections:
            self._close(connection)
        self._server.close()

    def _read_forever(self) -> None:
        while not self._closed:
            for key, _ in self._selector.select(READ_WAKE_S):
                if self._closed:
                    break
                if key.data is None:
                    self._accept()
                    continue
                connection = key.data
                try:
                    data = connection.sock.recv(READ_BYTES)
                except OSError:
                    data = b""
                if not data:
                    self._close(connection)
                    continue
                for message in connection.messages(data):
                    self._dispatch(connection, message)

    def _accept(self) -> None:
        try:
            sock, _ = self._server.accept()
        except OSError:
            return
        if not _same_user(sock):  # an abstract socket has no file permissions: frames are pickles, so only our own
            sock.close()
            return
        with self._lock:
            if not self._closed:
                self._selector.register(sock, selectors.EVENT_READ, _Connection(sock))
                return
        sock.close()  # closing: the peer must see this process gone

    def _dispatch(self, connection: _Connection, message: tuple) -> None:
        kind = message[0]
        if kind == FRAME:
            self.on_frame(message[1], message[2])
        elif kind == POLL:
            _, poll_id, source, epoch = message
            self.on_poll(source, epoch).add_done_callback(
                lambda answer: connection.send((ACKS, poll_id, answer.result())))
        else:
            future = connection.polls.pop(message[1], None)
            if future is not None:
                future.set_result(message[2])

    def _close(self, connection: _Connection) -> None:
        """A connection ended (its peer died, or a newer one replaced it): its unanswered polls fail."""
        with connection.lock:
            if not connection.alive:
                return
            connection.alive = False
        with self._lock:
            try:
                self._selector.unregister(connection.sock)
            except (KeyError, ValueError):
                pass
        connection.sock.close()
        polls, connection.polls = connection.polls, {}
        for future in polls.values():
            future.set_exception(WireLost("the peer process is gone"))
