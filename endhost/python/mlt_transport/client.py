"""A client of the transport `endhost serve` runs on this host (its Unix socket).

The socket speaks JSON lines (endhost/core/src/daemon.rs). A process attaches first:
the transport answers with a memfd, which both map, so a bucket's values cross
between the processes through shared memory; the socket carries only the request
and the reply.
"""

import json
import mmap
import os
import socket

ENV_SOCKET = "MLT_SOCKET"
ENV_TIMEOUT = "MLT_TIMEOUT"
DEFAULT_TIMEOUT = 120.0
CONNECT_TIMEOUT = 10.0
MAX_LINE = 1 << 20


class TransportError(RuntimeError):
    """The transport refused or failed a request, or did not answer in time."""


class TransportNotRunning(TransportError):
    """No transport answers on the socket."""


def _env_timeout():
    raw = os.environ.get(ENV_TIMEOUT)
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise TransportError(f"{ENV_TIMEOUT}={raw!r}: give seconds") from None
    if value <= 0:
        raise TransportError(f"{ENV_TIMEOUT}={raw!r}: give seconds above 0")
    return value


class Transport:
    """One connection to the launched transport.

    socket_path: the transport's socket (default: $MLT_SOCKET, which `mltctl env`
    and `mltctl launch` set). local_rank: this process's rank on its host (default:
    $LOCAL_RANK, else 0). timeout: seconds to wait for any reply (default:
    $MLT_TIMEOUT, else 120); a request that takes longer raises TransportError and
    the connection is closed, never a hang.
    """

    def __init__(self, socket_path=None, local_rank=None, timeout=None):
        path = socket_path or os.environ.get(ENV_SOCKET)
        if not path:
            raise TransportError(
                f"${ENV_SOCKET} is not set: source the environment `mltctl env --host NAME` "
                "prints (or `mltctl launch` writes), or pass socket_path"
            )
        self.path = path
        self.timeout = _env_timeout() if timeout is None else float(timeout)
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0)) if local_rank is None else local_rank
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(min(self.timeout, CONNECT_TIMEOUT))
        try:
            self._sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError) as e:
            self._sock.close()
            raise TransportNotRunning(
                f"no transport answers on {path} ({e.strerror}): start it with "
                "`mltctl launch` (or `endhost serve`) on every host"
            ) from None
        except OSError as e:
            self._sock.close()
            raise TransportError(f"cannot connect to {path}: {e}") from None
        self._sock.settimeout(self.timeout)
        self._pending = bytearray()
        # The attached region (an mmap), and how many f32 it holds.
        self.region = None
        self.region_values = 0
        # The last allreduce's time in the transport itself, seconds.
        self.last_seconds = None
        # The fraction of the last allreduce's result no loss reached.
        self.last_exact = None
        self.status = self._call({"op": "status"})
        if local_rank is None and "LOCAL_RANK" not in os.environ and self.status["local_ranks"] > 1:
            self.close()
            raise TransportError(
                f"the transport at {path} serves {self.status['local_ranks']} processes per host: "
                "start them with torchrun (it sets LOCAL_RANK) or pass local_rank"
            )

    # -- the socket -------------------------------------------------------------

    def close(self):
        """Closes the connection; the region is unmapped once no view of it is left."""
        self.region = None
        self.region_values = 0
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _broken(self, why):
        self.close()
        return TransportError(why)

    def _send(self, request):
        if self._sock is None:
            raise TransportError("the connection to the transport is closed")
        try:
            self._sock.sendall(json.dumps(request).encode() + b"\n")
        except socket.timeout:
            raise self._broken(f"the transport at {self.path} did not take a request within {self.timeout} s") from None
        except OSError as e:
            raise self._broken(f"the transport at {self.path} went away: {e}") from None

    def _receive(self, with_fd=False):
        """The next reply line, decoded; with the descriptor that came with it."""
        fds = []
        while b"\n" not in self._pending:
            try:
                if with_fd:
                    data, got, _, _ = socket.recv_fds(self._sock, 65536, 1)
                    fds.extend(got)
                else:
                    data = self._sock.recv(65536)
            except socket.timeout:
                for fd in fds:
                    os.close(fd)
                raise self._broken(
                    f"no reply from the transport at {self.path} within {self.timeout} s "
                    "(a peer may be down: see the transports' logs)"
                ) from None
            except OSError as e:
                raise self._broken(f"the transport at {self.path} went away: {e}") from None
            if not data:
                raise self._broken(f"the transport at {self.path} closed the connection")
            self._pending += data
            if len(self._pending) > MAX_LINE:
                raise self._broken("the transport sent a line too long to be a reply")
        line, _, rest = bytes(self._pending).partition(b"\n")
        self._pending = bytearray(rest)
        reply = json.loads(line)
        return (reply, fds) if with_fd else reply

    def _call(self, request):
        self._send(request)
        return self._receive()

    # -- requests -----------------------------------------------------------------

    def attach(self, nbytes):
        """Maps a shared region of at least `nbytes` (replacing the last one, which
        stays mapped while views of it remain) and returns it (an mmap)."""
        nbytes = max(4, (int(nbytes) + 4095) // 4096 * 4096)
        self._send({"op": "attach", "local_rank": self.local_rank, "bytes": nbytes})
        reply, fds = self._receive(with_fd=True)
        if reply.get("error"):
            for fd in fds:
                os.close(fd)
            raise TransportError(f"attach: {reply['error']}")
        if len(fds) != 1:
            raise self._broken("the transport's region came without its descriptor")
        try:
            self.region = mmap.mmap(fds[0], reply["bytes"])
        finally:
            os.close(fds[0])
        self.region_values = reply["bytes"] // 4
        return self.region

    def allreduce_shared(self, values, layers=(), loss_bound=None):
        """Allreduces the first `values` f32 of the region in place (a sum over every
        rank of the job). layers: (first value, layer) pairs, ascending. loss_bound:
        this allreduce's, default the job's: at most that share of the result is not
        exact. Returns the fraction delivered; `last_exact` holds the fraction exact."""
        if values > self.region_values:
            raise TransportError("attach a region large enough first")
        request = {"op": "allreduce_shared", "values": int(values),
                   "layers": [[int(at), int(layer)] for at, layer in layers]}
        if loss_bound is not None:
            request["loss_bound"] = float(loss_bound)
        reply = self._call(request)
        if reply.get("error"):
            raise TransportError(f"allreduce: {reply['error']}")
        self.last_seconds = reply["seconds"]
        self.last_exact = reply["exact"]
        return reply["delivered"]
