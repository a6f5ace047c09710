"""One model of a topology's nodes, driven by both engines: a source (`SourceNode`) and a worker's ack meter
(`AckMeter`). Plain code on a clock given by the caller, with no I/O."""

from topo.model.source import Buffer, SourceNode, ack_report, check_routed
from topo.model.worker import AckMeter, WindowMeter, queue_capacity

__all__ = ["AckMeter", "Buffer", "SourceNode", "WindowMeter", "ack_report", "check_routed", "queue_capacity"]
