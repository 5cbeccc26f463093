"""Training jobs on the transport `mltctl launch` starts: a PyTorch DDP communication
hook whose buckets cross the fabric through the bounded-loss transport."""

from .client import Transport, TransportError, TransportNotRunning
from .ddp import HookState, allreduce_hook, layer_map

__all__ = [
    "HookState",
    "Transport",
    "TransportError",
    "TransportNotRunning",
    "allreduce_hook",
    "layer_map",
]
