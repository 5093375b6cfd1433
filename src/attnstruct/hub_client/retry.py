"""The bounds of a hub request's retries and of each attempt: what is waited, how often, how long an answer may take.

:class:`RetryPolicy` holds the bounds (:mod:`attnstruct.hub_client.client` applies them to every request),
:class:`RetryCounter` counts the retries by reason (:data:`REASONS`) and the holds of the quota's pacer
(:mod:`attnstruct.hub_client.quota`), and :class:`Attempts` is one request's attempts under a policy: it waits
before the next one, or says no when a bound would be passed. A 429 waits what the hub asks for
(:func:`retry_after_s`: ``Retry-After``, else the reset ``t`` of the IETF ``RateLimit`` header plus a second, as
``huggingface_hub/utils/_http.py`` does since PR #3577, ``t`` being whole seconds), never less than
:data:`MIN_RATE_LIMIT_WAIT_S`; a wait that would pass the policy's total is not begun: the request fails at once, in
one line, however long the server asked for. Rate-limit retries are bounded by that total alone, which is two of the
Hub's 5-minute windows and a minute (hub-docs, ``docs/hub/rate-limits.md``); other failures by a few retries.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .failures import HubError

REQUEST_TIMEOUT_S = 120.0  # huggingface_hub's shared client has none: a stalled server would hang a sweep
MIN_RATE = 16_384.0  # bytes per second an answer must average after its first timeout_s (128 kbit/s)
MIN_RATE_LIMIT_WAIT_S = 1.0  # a 429 that says t=0 (or nothing) is not retried at once
REASONS = ("rate limited", "server error", "broken transfer", "timeout", "unreachable", "paced")


@dataclass(frozen=True)
class RetryPolicy:
    """The bounds of one request's retries and how long to wait between them, and the deadline of each attempt.

    * ``failures``: retries at most for reasons other than a rate limit; ``total_wait_s``: seconds waited at most,
      between the attempts and in the pacer's holds (a wait that would pass it is not begun). Rate-limit retries are
      bounded by ``total_wait_s`` alone (each waits at least :data:`MIN_RATE_LIMIT_WAIT_S`).
    * ``base_s``, ``cap_s``: when the server names no wait, retry ``n`` (from 0) waits a uniform draw from
      ``[0, min(cap_s, base_s * 2**n))`` ("full jitter").
    * ``timeout_s``, ``min_rate``: an attempt is given up (reason ``timeout``) at the first moment it has taken longer
      than :meth:`deadline_s` of the body bytes it has had so far, ``timeout_s + received / min_rate`` seconds. So an
      answer of ``n`` bytes may take ``timeout_s + n / min_rate`` seconds, connection, redirects and headers included,
      and one that stalls or trickles (a byte every few seconds) ends after about ``timeout_s``, whatever its length.
      ``timeout_s`` is also the HTTP client's timeout of each read.

    ``rng`` draws the jitter (pass ``random.Random(seed)`` to repeat it); ``sleep`` waits (a test passes a recorder).
    """

    failures: int = 3
    total_wait_s: float = 660.0  # two of the Hub's 5-minute windows, each waited to its end plus a second, and more
    base_s: float = 1.0
    cap_s: float = 30.0
    timeout_s: float = REQUEST_TIMEOUT_S
    min_rate: float = MIN_RATE
    rng: random.Random = field(default_factory=random.Random, compare=False)
    sleep: Callable[[float], object] = field(default=time.sleep, compare=False)

    def __post_init__(self):
        if self.failures < 0 or min(self.total_wait_s, self.base_s, self.cap_s) < 0:
            raise ValueError(f"a retry policy needs no negative bound: {self}")
        if self.timeout_s <= 0 or self.min_rate <= 0:
            raise ValueError(f"a retry policy needs a positive timeout and minimum rate: {self}")

    def backoff(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (0 for the first) when the server names no wait."""
        return self.rng.uniform(0.0, min(self.cap_s, self.base_s * 2.0**retry))

    def deadline_s(self, received: int) -> float:
        """Seconds an attempt may have taken when it has had ``received`` body bytes."""
        return self.timeout_s + received / self.min_rate


class RetryCounter:
    """Retries by reason and seconds waited, over any number of requests and threads; ``paced`` counts the holds of
    the quota's pacer, which are waits but not retries."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._retries = dict.fromkeys(REASONS, 0)
            self._waited = 0.0

    def add(self, reason: str, waited_s: float) -> None:
        with self._lock:
            self._retries[reason] += 1
            self._waited += waited_s

    @property
    def retries(self) -> dict[str, int]:
        """``{reason: retries}`` for every reason of :data:`REASONS`."""
        with self._lock:
            return dict(self._retries)

    @property
    def waited_s(self) -> float:
        with self._lock:
            return self._waited

    def summary(self) -> str:
        """``hub: 7 retries (5 rate limited, 1 server error, 1 broken transfer), 3 paced, 12.0 s waited``, or ``hub:
        no retries``."""
        retries, waited = self.retries, self.waited_s
        paced = retries.pop("paced")
        total = sum(retries.values())
        if not total and not paced:
            return "hub: no retries"
        parts = ", ".join(f"{n} {reason}" for reason, n in retries.items() if n)
        said = f"{total} {'retry' if total == 1 else 'retries'} ({parts})" if total else "no retries"
        holds = f", {paced} paced" if paced else ""
        return f"hub: {said}{holds}, {waited:.1f} s waited"


class Retryable(Exception):
    """One failed attempt that may be retried: its reason, what went wrong, and the wait the server asked for."""

    def __init__(self, reason: str, detail: str, retry_after: float | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.retry_after = reason, detail, retry_after


class Attempts:
    """The attempts of one request under a policy; :meth:`retry` waits before the next one or says no."""

    def __init__(self, policy: RetryPolicy, counter: RetryCounter):
        self.policy, self.counter = policy, counter
        self.tries, self.failures, self.waited = 1, 0, 0.0
        self.refused_wait: float | None = None

    @property
    def budget_s(self) -> float:
        """Seconds the request may still wait."""
        return max(0.0, self.policy.total_wait_s - self.waited)

    def paced(self, waited_s: float) -> None:
        """Count a hold of the quota's pacer before an attempt."""
        if waited_s > 0:
            self.counter.add("paced", waited_s)
            self.waited += waited_s

    def retry(self, failure: Retryable) -> bool:
        policy = self.policy
        if failure.reason != "rate limited":
            self.failures += 1
            if self.failures > policy.failures:
                return False
        wait = failure.retry_after if failure.retry_after is not None else policy.backoff(self.tries - 1)
        if failure.reason == "rate limited":
            wait = max(MIN_RATE_LIMIT_WAIT_S, wait)
        if self.waited + wait > policy.total_wait_s:
            self.refused_wait = wait
            return False
        self.counter.add(failure.reason, wait)
        policy.sleep(wait)
        self.waited += wait
        self.tries += 1
        return True

    def give_up(self, failure: Retryable, what: str) -> HubError:
        tries = f"{self.tries} attempt{'s' if self.tries > 1 else ''}, {self.waited:.1f} s waited"
        if self.refused_wait is not None:
            tries += f"; the next wait, {self.refused_wait:.1f} s, would pass {self.policy.total_wait_s:.0f} s"
        if failure.reason == "rate limited":
            return HubError(f"the hub refused {what} (HTTP 429; {tries}): try again later", "rate limited")
        if failure.reason == "unreachable":
            return HubError(
                f"the hub could not be reached for {what}: {failure.detail} ({tries}); check the network, or set "
                "HF_HUB_OFFLINE=1 to use the cache only",
                "offline",
            )
        if failure.reason == "broken transfer":
            return HubError(f"the transfer of {what} broke off ({failure.detail}; {tries})", "truncated")
        return HubError(f"cannot read {what} from the hub: {failure.detail} ({tries})")


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429 asks to wait: ``Retry-After`` (seconds or an HTTP date; a past date is 0), else the reset ``t`` of
    ``RateLimit: "api";r=0;t=N`` plus a second (``t`` is whole seconds: the window ends up to a second later), else
    None."""
    from huggingface_hub.utils import parse_ratelimit_headers

    value = (headers.get("Retry-After") or "").strip()
    if value.isascii() and value.isdigit():  # not str.isdigit alone: "\xb2" (a latin-1 header's "²") is a digit to it
        return float(value)
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    limit = parse_ratelimit_headers(headers)
    return float(limit.reset_in_seconds) + 1.0 if limit is not None and limit.remaining == 0 else None
