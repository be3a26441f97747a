"""What a request for samples asks, checked before anything is loaded: without torch (2-3 s to
import), so that a bad value is answered at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gptkit.shared.errors import SettingError


@dataclass(frozen=True)
class Settings:
    """`max_new_tokens` per sample; `num_samples` continuations of the prompt, generated as one
    batch; `temperature` (0: greedy), `top_p` (nucleus) and `top_k` shape each draw; `seed`: the
    same seed gives the same text (None: one drawn at random, which Samples.seed tells); a sample
    stops at the first of `stops` it produces, and always at the end-of-text token."""

    max_new_tokens: int = 256
    num_samples: int = 1
    temperature: float = 0.8
    top_p: float = 0.9
    top_k: int | None = None
    seed: int | None = None
    stops: Sequence[str] = ()  # a list given is kept as a tuple

    def __post_init__(self) -> None:
        # A bool is an int to Python but no number to a caller; NaN fails every comparison.
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SettingError(name, f"{value!r}: expected a number")
        if not self.temperature >= 0:
            raise SettingError("temperature", f"{self.temperature!r}: expected 0 (greedy) or more")
        if not 0 < self.top_p <= 1:
            raise SettingError("top_p", f"{self.top_p!r}: expected a number above 0, at most 1")
        if self.top_k is not None and not (type(self.top_k) is int and self.top_k >= 1):
            raise SettingError("top_k", f"{self.top_k!r}: expected a whole number, 1 or more")
        for name in ("max_new_tokens", "num_samples"):
            if not (type(getattr(self, name)) is int and getattr(self, name) >= 1):
                raise SettingError(name, f"{getattr(self, name)!r}: expected a whole number, 1 or more")
        if self.seed is not None and not (type(self.seed) is int and 0 <= self.seed < 2**63):
            raise SettingError("seed", f"{self.seed!r}: expected a whole number from 0 to 2**63 - 1, or none")
        if isinstance(self.stops, str) or not all(isinstance(stop, str) for stop in self.stops):
            raise SettingError("stops", f"{self.stops!r}: expected a list of strings")
        object.__setattr__(self, "stops", tuple(self.stops))  # frozen: a list given is kept as a tuple
