"""One connection to the launched transport, as the hook and the process group use it:
the shared region as a float32 view, and the one worker thread that issues every
request in order (the transport needs each rank's collectives in one order, as gloo
does). The hook and the `mlt` process group of a process share one channel."""

import concurrent.futures

import torch

from .client import Transport


class Channel:
    """transport: a `Transport` (default: one on $MLT_SOCKET, see `Transport`)."""

    def __init__(self, transport=None, timeout=None):
        self.transport = transport or Transport(timeout=timeout)
        self._view = None
        # One worker: the transport must see every rank's allreduces in one order.
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mlt")

    @property
    def status(self):
        return self.transport.status

    def __getstate__(self):
        raise TypeError("a channel holds a connection and cannot be pickled")

    def region(self, values):
        """The first `values` float32 of the shared region (attached, or grown, on
        demand). Only the worker thread may touch it."""
        if self._view is None or values > self.transport.region_values:
            region = self.transport.attach(max(values, 1) * 4)
            self._view = torch.frombuffer(region, dtype=torch.float32)
        return self._view[:values]

    def allreduce(self, values, layers=(), loss_bound=None):
        """Sums the region's first `values` over the job, in place; the fraction
        delivered (`transport.last_exact`: the fraction exact)."""
        return self.transport.allreduce_shared(values, layers, loss_bound)

    def submit(self, work, device=None):
        """Runs `work` on the worker; a future of its result. For a CUDA `device`, the
        work waits for what the current stream has queued so far."""
        if device is not None and device.type == "cuda":
            future = torch.futures.Future(devices=[device])
            ready = torch.cuda.Event()
            ready.record()
        else:
            future = torch.futures.Future()
            ready = None

        def run():
            try:
                if ready is not None:
                    ready.synchronize()
                future.set_result(work())
            except BaseException as e:  # the caller gets it from the future
                future.set_exception(e)

        self._worker.submit(run)
        return future

    def close(self):
        self._worker.shutdown(wait=True)
        self._view = None
        self.transport.close()
