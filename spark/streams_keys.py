"""Key generators of the stream datasets: pure numpy functions of a seq range, so any split gives the same stream.

Every generator turns the seeded block uniforms of `topo.data.streamspec.block_uniforms` into key ids:
- `SpecKeys`: `zipf` and `drift` (rotate), exactly the sampler of the inline specs;
- `PermutedDrift`: `drift` whose ranking is a fresh pseudo-random permutation of the key ids in every interval of
  `shift_every` messages (the drift of the FISH and D-Choices datasets), drawn by a keyed Feistel network so a
  message's key costs O(1) whatever the number of keys or intervals;
- `WordKeys`: real words drawn by inverse cdf from the `wordfreq` frequencies of the top K words of a language.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topo.data.streams import StreamSpec, key_names, sample_key_ids, spec_meta
from topo.data.streamspec import StreamError, block_uniforms
from topo.data.zipf import zipf_p1, zipf_rank_index

PERMUTE_STREAM = 2  # spawn-key prefix; 0 and 1 are the rank uniforms and rotation offsets of topo.data.streamspec
FEISTEL_ROUNDS = 6  # Luby-Rackoff: four rounds already make a strong pseudo-random permutation
WORDLISTS = ("small", "large", "best")


@dataclass(frozen=True)
class SpecKeys:
    """`zipf` or `drift` (rotate): the inline spec's own sampler, so datasets equal `stream_from_spec`."""

    spec: StreamSpec

    @property
    def size(self) -> int:
        """Number of possible key ids."""
        return int(self.spec.params["keys"])

    def sample(self, start: int, stop: int) -> np.ndarray:
        """Key ids of messages [start, stop)."""
        return sample_key_ids(self.spec.generator, self.spec.params, start, stop)

    def names(self, ids: np.ndarray) -> np.ndarray:
        """Key strings of key ids ("k" + id)."""
        return key_names(ids)

    def meta(self) -> dict:
        """What the spec fixes before sampling (the same fields as the single-process writer)."""
        meta = spec_meta(self.spec)
        if self.spec.generator == "drift":
            meta["drift_mode"] = "rotate"
        return meta


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer of each uint64 (a cheap, well-mixed hash)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _feistel(x: np.ndarray, tweak: np.ndarray, round_keys: np.ndarray, half_bits: int) -> np.ndarray:
    """A keyed bijection of [0, 2^(2*half_bits)): balanced Feistel rounds with a splitmix64 round function."""
    mask = np.uint64((1 << half_bits) - 1)
    shift = np.uint64(half_bits)
    left, right = x >> shift, x & mask
    for key in round_keys:
        left, right = right, left ^ (_splitmix64(right ^ tweak ^ key) & mask)
    return (left << shift) | right


def permute_ids(ranks: np.ndarray, epochs: np.ndarray, seed: int, keys: int) -> np.ndarray:
    """Key id of each 0-based rank under the seeded permutation of [0, keys) that belongs to its epoch."""
    half_bits = max(1, (max(keys - 1, 1).bit_length() + 1) // 2)
    round_keys = np.random.SeedSequence(seed, spawn_key=(PERMUTE_STREAM,)).generate_state(
        FEISTEL_ROUNDS, np.uint64
    )
    tweak = _splitmix64(np.asarray(epochs, dtype=np.uint64) ^ round_keys[0])
    out = _feistel(np.asarray(ranks, dtype=np.uint64), tweak, round_keys, half_bits)
    # cycle walking: the domain is at most 4x keys, so a few more rounds bring every value into [0, keys)
    outside = np.flatnonzero(out >= np.uint64(keys))
    while outside.size:
        out[outside] = _feistel(out[outside], tweak[outside], round_keys, half_bits)
        outside = outside[out[outside] >= np.uint64(keys)]
    return out.astype(np.int64)


@dataclass(frozen=True)
class PermutedDrift:
    """Zipf ranks whose key ids are re-drawn (a new random ranking) every `shift_every` messages."""

    z: float
    keys: int
    shift_every: int
    seed: int

    @property
    def size(self) -> int:
        """Number of possible key ids."""
        return self.keys

    def sample(self, start: int, stop: int) -> np.ndarray:
        """Key ids of messages [start, stop)."""
        ranks = zipf_rank_index(block_uniforms(self.seed, start, stop), self.z, self.keys)
        epochs = np.arange(start, stop, dtype=np.int64) // self.shift_every
        return permute_ids(ranks, epochs, self.seed, self.keys)

    def names(self, ids: np.ndarray) -> np.ndarray:
        """Key strings of key ids ("k" + id)."""
        return key_names(ids)

    def meta(self) -> dict:
        """Generator, parameters and the exact share of rank 1 within each interval."""
        params = {"z": self.z, "keys": self.keys, "shift_every": self.shift_every, "seed": self.seed}
        return {
            "generator": "drift",
            "params": params,
            "seed": self.seed,
            "drift_mode": "permute",
            "p1_exact": zipf_p1(self.z, self.keys),
        }


@dataclass(frozen=True)
class WordKeys:
    """Words drawn with the normalised frequencies of the top `len(words)` words of a wordfreq list."""

    lang: str
    wordlist: str
    seed: int
    words: np.ndarray  # most frequent first
    cdf: np.ndarray  # cumulative pmf over `words`, ending in exactly 1.0

    @property
    def size(self) -> int:
        """Number of possible key ids (words)."""
        return int(self.words.size)

    def sample(self, start: int, stop: int) -> np.ndarray:
        """Word index of messages [start, stop), by inverse cdf of the block uniforms."""
        return np.searchsorted(self.cdf, block_uniforms(self.seed, start, stop), side="right").astype(np.int64)

    def names(self, ids: np.ndarray) -> np.ndarray:
        """The words of word indices."""
        return self.words[np.asarray(ids, dtype=np.int64)]

    def meta(self) -> dict:
        """Generator, parameters and the exact share of the most frequent word."""
        return {
            "generator": "words",
            "params": {"lang": self.lang, "wordlist": self.wordlist, "keys": self.size, "seed": self.seed},
            "seed": self.seed,
            "p1_exact": float(self.cdf[0]),
        }


def word_keys(lang: str, wordlist: str = "best", keys: int | None = None, seed: int = 0) -> WordKeys:
    """The top `keys` words of `lang` (all of the list when None) from wordfreq; StreamError if unknown."""
    import wordfreq

    if wordlist not in WORDLISTS:
        raise StreamError(f"--wordlist '{wordlist}': unknown (expected one of: {', '.join(WORDLISTS)})")
    langs = sorted(wordfreq.available_languages(wordlist))
    if lang not in langs:
        raise StreamError(f"--lang '{lang}': no '{wordlist}' wordlist for it (available: {', '.join(langs)})")
    freq = wordfreq.get_frequency_dict(lang, wordlist)
    if keys is not None and not 1 <= keys <= len(freq):
        raise StreamError(f"--keys {keys}: the '{wordlist}' {lang} wordlist has {len(freq)} words (need 1..that)")
    # most frequent first, ties by the word itself, so the table never depends on dict order
    ranked = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[: keys or len(freq)]
    words = np.array([w for w, _ in ranked], dtype=object)
    cdf = np.cumsum(np.array([f for _, f in ranked], dtype=np.float64))
    cdf /= cdf[-1]
    cdf[-1] = 1.0  # every uniform in [0, 1) lands on a word
    return WordKeys(lang, wordlist, int(seed), words, cdf)
