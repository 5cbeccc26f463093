"""Training jobs on the transport `mltctl launch` starts: the `mlt` backend of
torch.distributed (`dist.init_process_group("mlt")`, registered on import), and a
PyTorch DDP communication hook whose buckets cross the fabric through the bounded-loss
transport."""

from .backend import ProcessGroupMLT, register
from .channel import Channel
from .client import Transport, TransportError, TransportNotRunning
from .ddp import HookState, allreduce_hook, layer_map

register()

__all__ = [
    "Channel",
    "HookState",
    "ProcessGroupMLT",
    "Transport",
    "TransportError",
    "TransportNotRunning",
    "allreduce_hook",
    "layer_map",
]
