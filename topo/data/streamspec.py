"""Inline stream specs (`zipf:...`, `drift:...`, `zf:...`) and the one seeded sampler that turns them into key ids.

The sampler is a pure function of (generator, params, seq range): the sequence numbers are cut into fixed
blocks of `BLOCK` messages and each block draws its uniforms from its own Philox generator keyed by
(seed, block), so any split of [0, messages) into ranges, on any number of processes or machines,
concatenates to the same stream.

Rank to key id: in epoch e, rank r is key id (r - 1 + offset_e) mod keys, a rotation of the key space by a
seeded pseudo-random offset_e (a splitmix64 hash of (seed, e), so O(1) per message and free of state).
`zipf` has a single epoch, so its hot key still depends on the seed; `drift` starts a new epoch every
`shift_every` messages, which moves the whole hot set to fresh keys while the rank law stays the same.
`zf` is FISH's time-evolving ZF stream (paper 003): blocks of `block` messages, each with a fresh ranking, whose
hot set moves once more after the share `hot_after` of the block (hot_after = 1: only at block boundaries; a
block as long as the stream and hot_after = 1: one plain Zipf law, the paper's text read literally).
Two consecutive epochs share their offset with probability 1/keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topo.data.zipf import MAX_KEYS, zipf_rank_index

BLOCK = 1 << 16  # messages per independently seeded block of uniforms
GENERATORS = {
    "zipf": ("z", "keys", "messages", "seed"),
    "drift": ("z", "keys", "messages", "shift_every", "seed"),
    "zf": ("z", "keys", "messages", "block", "hot_after", "seed"),
}
_DEFAULTS = {"seed": 0}
_INTEGER_PARAMS = ("keys", "messages", "shift_every", "block", "seed")
_RANK_STREAM, _OFFSET_STREAM = 0, 1  # spawn-key prefixes keep the two uses of one seed independent


class StreamError(ValueError):
    """A stream that cannot be built or read; the message is one line meant for the user."""


@dataclass(frozen=True)
class StreamSpec:
    """A parsed inline spec: generator name, sampler params (with seed) and the number of messages."""

    generator: str
    params: dict
    messages: int

    @property
    def seed(self) -> int:
        """Seed of the stream."""
        return int(self.params["seed"])

    @property
    def text(self) -> str:
        """Canonical inline form, e.g. `zipf:z=1.2,keys=100000,messages=1000000,seed=7`."""
        values = {**self.params, "messages": self.messages}
        return f"{self.generator}:" + ",".join(f"{k}={_fmt(values[k])}" for k in GENERATORS[self.generator])

    def sample(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Key ids of messages [start, stop) of this stream (stop defaults to the end)."""
        stop = self.messages if stop is None else stop
        if not 0 <= start <= stop <= self.messages:
            raise StreamError(
                f"stream '{self.text}': range [{start}, {stop}) is outside [0, {self.messages})"
            )
        return sample_key_ids(self.generator, self.params, start, stop)


def _fmt(v: float | int) -> str:
    """Shortest decimal for a parameter value (integers without a trailing .0)."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return repr(v)


def is_inline_spec(spec: str) -> bool:
    """True if `spec` looks like `name:params` rather than a path."""
    head, sep, _ = spec.partition(":")
    return bool(sep) and head.isidentifier()


def parse_stream_spec(spec: str) -> StreamSpec:
    """Parse `zipf:z=..,keys=..,messages=..[,seed=..]` or `drift:..,shift_every=..` (StreamError if bad)."""
    head, sep, body = spec.strip().partition(":")
    generator = head.strip().lower()

    def fail(problem: str) -> StreamError:
        return StreamError(f"stream '{spec}': {problem}")

    if not sep or generator not in GENERATORS:
        raise fail(f"unknown generator '{head.strip()}' (expected one of: {', '.join(GENERATORS)})")
    allowed = GENERATORS[generator]
    raw: dict[str, str] = {}
    for item in body.split(",") if body.strip() else []:
        name, eq, value = item.partition("=")
        name = name.strip().lower()
        if not eq or not name:
            raise fail(f"parameter '{item.strip()}' is not name=value")
        if name not in allowed:
            raise fail(f"unknown parameter '{name}' for {generator} (expected: {', '.join(allowed)})")
        if name in raw:
            raise fail(f"parameter '{name}' is given twice")
        raw[name] = value.strip()
    values: dict[str, float | int] = dict(_DEFAULTS)
    for name, text in raw.items():
        values[name] = _parse_number(name, text, fail)
    lowest = {"z": 0, "keys": 1, "messages": 1, "seed": 0, "shift_every": 1, "block": 1, "hot_after": 0}
    for name, value in values.items():
        if value < lowest[name]:
            raise fail(f"{name} must be at least {lowest[name]} (got {raw[name]})")
    if values.get("hot_after", 0) > 1:
        raise fail(f"hot_after is a share of the block, at most 1 (got {raw['hot_after']})")
    if values.get("keys", 1) > MAX_KEYS:
        raise fail(f"keys must be at most {MAX_KEYS} (got {raw['keys']})")
    missing = [p for p in allowed if p not in values]
    if missing:
        raise fail(f"missing parameter{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    messages = int(values.pop("messages"))
    params = {k: values[k] for k in allowed if k in values}
    return StreamSpec(generator, params, messages)


def _parse_number(name: str, text: str, fail) -> float | int:
    """One parameter value: z a finite float, the others whole numbers (1e6 allowed)."""
    try:
        x = float(text)
    except ValueError:
        raise fail(f"{name} must be a number (got '{text}')") from None
    if not math.isfinite(x):
        raise fail(f"{name} must be a finite number (got '{text}')")
    if name not in _INTEGER_PARAMS:
        return x
    try:
        # exact for plain integers of any size; float() alone would round seeds above 2^53
        return int(text)
    except ValueError:
        if not x.is_integer():
            raise fail(f"{name} must be a whole number (got '{text}')") from None
        return int(x)


def _check_params(generator: str, params: dict) -> tuple[float, int, int, int | None]:
    """Validated (z, keys, seed, shift_every) of sampler params; shift_every is None for zipf."""
    if generator not in GENERATORS:
        raise StreamError(f"unknown generator '{generator}' (expected one of: {', '.join(GENERATORS)})")
    needed = [p for p in GENERATORS[generator] if p not in ("messages", "seed")]
    missing = [p for p in needed if p not in params]
    if missing:
        raise StreamError(f"{generator}: missing parameter {', '.join(missing)}")
    try:
        z, keys, seed = float(params["z"]), int(params["keys"]), int(params.get("seed", 0))
        shift_every = int(params["shift_every"]) if generator == "drift" else None
    except (TypeError, ValueError):
        raise StreamError(f"{generator}: parameters must be numbers (got {params})") from None
    if not (math.isfinite(z) and z >= 0) or not 1 <= keys <= MAX_KEYS or seed < 0:
        raise StreamError(f"{generator}: need z >= 0, 1 <= keys <= {MAX_KEYS} and seed >= 0 (got {params})")
    if shift_every is not None and shift_every < 1:
        raise StreamError(f"drift: shift_every must be at least 1 (got {shift_every})")
    if generator == "zf":
        try:
            block, hot_after = int(params["block"]), float(params["hot_after"])
        except (TypeError, ValueError):
            raise StreamError(f"zf: parameters must be numbers (got {params})") from None
        if block < 1 or not 0 <= hot_after <= 1:
            raise StreamError(f"zf: need block >= 1 and 0 <= hot_after <= 1 (got {params})")
    return z, keys, seed, shift_every


def block_uniforms(seed: int, start: int, stop: int) -> np.ndarray:
    """Uniforms in [0, 1) of messages [start, stop); message seq always gets the same value for a seed."""
    out = np.empty(stop - start, dtype=np.float64)
    if stop <= start:
        return out
    for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
        lo = block * BLOCK
        a, b = max(lo, start), min(lo + BLOCK, stop)
        rng = np.random.Generator(
            np.random.Philox(np.random.SeedSequence(seed, spawn_key=(_RANK_STREAM, block)))
        )
        if a == lo and b == lo + BLOCK:
            rng.random(out=out[a - start : b - start])
        else:
            # a partial block draws the whole block so every message keeps its own uniform
            out[a - start : b - start] = rng.random(BLOCK)[a - lo : b - lo]
    return out


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer of each uint64 (a cheap, well-mixed hash)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def epoch_offsets(seed: int, keys: int, epochs: np.ndarray) -> np.ndarray:
    """Rotation offset in [0, keys) of each epoch number, a pure function of (seed, epoch)."""
    base = np.random.SeedSequence(seed, spawn_key=(_OFFSET_STREAM,)).generate_state(1, np.uint64)[0]
    mixed = _splitmix64(np.asarray(epochs, dtype=np.uint64) ^ base)
    return (mixed % np.uint64(keys)).astype(np.int64)


def sample_key_ids(generator: str, params: dict, start: int, stop: int) -> np.ndarray:
    """Key id (int64 in [0, keys)) of every message with seq in [start, stop), the same for any split."""
    z, keys, seed, shift_every = _check_params(generator, params)
    start, stop = int(start), int(stop)
    if not 0 <= start <= stop:
        raise StreamError(f"{generator}: need 0 <= start <= stop (got [{start}, {stop}))")
    ids = zipf_rank_index(block_uniforms(seed, start, stop), z, keys)
    if stop == start:
        return ids
    if generator == "zf":
        offset = epoch_offsets(seed, keys, zf_epochs(int(params["block"]), float(params["hot_after"]), start, stop))
    elif shift_every is None:
        offset = epoch_offsets(seed, keys, np.zeros(1))[0]
    else:
        first, last = start // shift_every, (stop - 1) // shift_every
        epochs = np.arange(first, last + 1)
        # messages of each epoch inside [start, stop): boundaries clipped to the range
        bounds = np.clip(np.append(epochs * shift_every, (last + 1) * shift_every), start, stop)
        offset = np.repeat(epoch_offsets(seed, keys, epochs), np.diff(bounds))
    ids += offset
    ids %= keys
    return ids


def zf_epochs(block: int, hot_after: float, start: int, stop: int) -> np.ndarray:
    """Epoch of each message in [start, stop) of a `zf` stream: two per block, the second from the share
    `hot_after` of the block on (none when hot_after = 1)."""
    seq = np.arange(start, stop, dtype=np.int64)
    cut = round(hot_after * block)
    return 2 * (seq // block) + (seq % block >= cut)


def key_names(ids: np.ndarray) -> np.ndarray:
    """Key string of each key id: "k" followed by the decimal id."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.char.add("k", ids.astype(str))
