"""A source's inbox of acks in the compiled event loop (`topo.sim.loop`): acks join it as they land, and the
source's grouping takes them at its next step, as `SourceNode.step` hands its grouping every ack that landed
since the last one (`_deliver_feedback`).

Two groupings learn from acks in compiled code, each as its Python `feedback` does, line for line
(`tests/test_sim_loop.py` holds them to the same runs):

    CG    its pairing, on the signals of the workers' delegation (`groupings.adaptive.pairing`)
    FISH  each worker's time per tuple, the last one an ack told (`Fish.feedback` and `_publish_service`)

The inbox of source s: fields [s, k] = (queue_len, load, utilization, service_ms, tuples acked) and
(worker, signal) [s, k] of its k-th ack, and (acks, signals among them) [s].
"""

from __future__ import annotations

import numpy as np
from numba import njit

from groupings.adaptive import pairing
from groupings.adaptive.fish_route import HEARD
from topo.model.pairwise import pairwise_sum_with

NONE, CG, FISH = 0, 1, 2  # which grouping's feedback the loop runs (`cfg_i[8]`)


@njit(cache=True, inline="always")
def to_inbox(inbox_f, inbox_i, inbox_n, s, w, signal, acked, fields):
    """An ack from worker w landed at source s: its fields, tuples acked and signal join the source's inbox."""
    n = inbox_n[s, 0]
    for k in range(4):
        inbox_f[s, n, k] = fields[k]
    inbox_f[s, n, 4] = acked
    inbox_i[s, n, 0], inbox_i[s, n, 1] = w, signal
    inbox_n[s, 0] = n + 1
    if signal != 0:
        inbox_n[s, 1] += 1


@njit(cache=True, inline="always")
def _fish_takes(fish, s, inbox_f, inbox_i, n):
    """`Fish.feedback`: the last time per tuple each acking worker told (zero: not measured), then `P_w`."""
    stack, measured, heard, gathered, sums = fish
    told = False
    for k in range(n):
        service_ms = inbox_f[s, k, 3]
        if np.isfinite(service_ms) and service_ms > 0:
            w = inbox_i[s, k, 0]
            measured[s, w] = service_ms / 1e3
            heard[s, w] = 1
            told = True
    if not told:
        return
    m = 0  # `_publish_service`: workers not heard from take the mean of those heard (numpy's sum, bit for bit)
    for w in range(measured.shape[1]):
        if heard[s, w]:
            gathered[m] = measured[s, w]
            m += 1
    mean = pairwise_sum_with(gathered[:m], sums) / m
    service = stack[2]
    for w in range(measured.shape[1]):
        service[s, w] = measured[s, w] if heard[s, w] else mean
    stack[9][s, HEARD] = 1


@njit(cache=True, inline="always")
def take(mode, fb, s):
    """Source s steps: its grouping takes every ack in its inbox, which empties."""
    inbox_f, inbox_i, inbox_n = fb[1], fb[2], fb[3]
    n = inbox_n[s, 0]
    if mode == CG and inbox_n[s, 1]:
        for k in range(n):
            if inbox_i[s, k, 1] != 0:
                pairing.signal(fb[4], s, inbox_i[s, k, 0], inbox_i[s, k, 1])
    elif mode == FISH and n:
        _fish_takes(fb[10], s, inbox_f, inbox_i, n)
    inbox_n[s, 0] = 0
    inbox_n[s, 1] = 0
