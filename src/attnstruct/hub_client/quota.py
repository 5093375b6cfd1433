"""The hub's quotas, obeyed before they refuse: every request counted by bucket, and paced from what the hub says.

The Hugging Face Hub counts requests per bucket in fixed 5-minute windows (hub-docs, ``docs/hub/rate-limits.md``):
every URL with a ``/resolve/`` segment is a "resolvers" call, other ``/api/`` calls are "api" calls, and every answer,
a 200 as much as a 429, says what is left: ``RateLimit: "<bucket>";r=<left>;t=<seconds to the window's end>`` and
``RateLimit-Policy: "fixed window";"<bucket>";q=<limit>;w=<window seconds>``. ``t`` is whole seconds, so the window
may end up to a second after ``t``: ``huggingface_hub`` waits ``t + 1`` "to avoid rounding issues"
(``huggingface_hub/utils/_http.py``, PR #3577), and so does :class:`Pacer`.

* :func:`bucket_of`: the bucket of a request: ``resolvers`` (a path holding ``/resolve/`` or under
  ``/api/resolve-cache/``), ``api`` (any other path on the hub's origin), ``cdn`` (another origin: where a signed
  link leads).
* :class:`CallCounter`: requests by bucket, every hop of every attempt, over any number of threads
  (``hub calls: 7 resolver, 2 API, 31 CDN``).
* :class:`Pacer`: one per process (:data:`PACER`), shared by every request, so by a sweep's workers and their
  prefetch threads. Per (origin, bucket) it keeps the window's end and an estimate of the requests left in it: the
  lowest ``r`` the hub has said in this window less the requests still on their way (let go, not yet answered),
  less the requests let go since. When none are left it holds new
  requests of that bucket until the window's end plus a second, then lets them go into the next window: the quota
  is slowed down to, not run into. Holds are the caller's to count and to bound (:meth:`Pacer.admit`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

BUCKETS = ("resolvers", "api", "cdn")
_NAMES = {"resolvers": "resolver", "api": "API", "cdn": "CDN"}
ROUNDING_S = 1.0  # a window's end may come this long after the whole seconds ``t`` says


def bucket_of(url: str, home_origin: tuple[str, str, int], url_origin: tuple[str, str, int]) -> str:
    """The bucket a request to ``url`` (of origin ``url_origin``) is counted in, the hub being ``home_origin``."""
    if url_origin != home_origin:
        return "cdn"
    path = urlsplit(url).path
    return "resolvers" if "/resolve/" in path or path.startswith("/api/resolve-cache/") else "api"


class CallCounter:
    """Requests to a hub by bucket (:data:`BUCKETS`), over any number of requests and threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._calls = dict.fromkeys(BUCKETS, 0)

    def add(self, bucket: str, n: int = 1) -> None:
        with self._lock:
            self._calls[bucket] += n

    @property
    def calls(self) -> dict[str, int]:
        """``{bucket: requests}`` for every bucket of :data:`BUCKETS`."""
        with self._lock:
            return dict(self._calls)

    def summary(self) -> str:
        """``hub calls: 7 resolver, 2 API, 31 CDN``."""
        calls = self.calls
        return "hub calls: " + ", ".join(f"{calls[bucket]} {_NAMES[bucket]}" for bucket in BUCKETS)


@dataclass
class _Window:
    end: float | None = None  # clock time by which the window has surely ended (None: not said)
    left: int | None = None  # requests the window is thought to have left (None: not said)
    limit: int | None = None  # q of RateLimit-Policy
    length: float | None = None  # w of RateLimit-Policy
    on_the_way: int = 0  # requests let go and not answered yet


class Pacer:
    """Holds requests of a bucket whose window has nothing left until it ends (module docstring). Thread-safe.

    ``clock`` gives seconds (monotonic); a test passes a fake one that its fake ``sleep`` moves on.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self._windows: dict[tuple, _Window] = {}

    def admit(self, key: tuple, sleep: Callable[[float], object], most_s: float) -> float:
        """Let one request of ``key`` (``(origin, bucket)``) go, first waiting (by ``sleep``) for its window's end
        when the window has nothing left, unless that wait is over ``most_s``. Returns the seconds waited."""
        with self._lock:
            window = self._windows.setdefault(key, _Window())
            wait = self._hold(window)
            if wait is None:
                self._take(window)
                return 0.0
            if wait > most_s:  # not begun: the hub refuses the request or not, and the caller's bounds decide
                self._take(window)
                return 0.0
            waited_for = window.end
        sleep(wait)
        with self._lock:
            if window.end == waited_for:  # no other request has seen the next window yet
                self._next_window(window)
            self._take(window)
        return wait

    def take(self, key: tuple) -> None:
        """Count one request of ``key`` let go without a hold (a redirect's next hop, inside an attempt)."""
        with self._lock:
            self._take(self._windows.setdefault(key, _Window()))

    def release(self, key: tuple) -> None:
        """A request of ``key`` let go that will not be answered (its attempt ended without an answer)."""
        with self._lock:
            window = self._windows.setdefault(key, _Window())
            window.on_the_way = max(0, window.on_the_way - 1)

    def answered(self, key: tuple, headers: Mapping[str, str]) -> None:
        """A request of ``key`` was answered: its ``RateLimit`` and ``RateLimit-Policy`` (any status) read into the
        window, less the requests still on their way, which the hub may not have counted yet."""
        from huggingface_hub.utils import parse_ratelimit_headers

        said = parse_ratelimit_headers(headers)
        now = self.clock()
        with self._lock:
            window = self._windows.setdefault(key, _Window())
            window.on_the_way = max(0, window.on_the_way - 1)
            if said is None:
                return
            if said.limit is not None and said.window_seconds:
                window.limit, window.length = said.limit, float(said.window_seconds)
            left = max(0, said.remaining - window.on_the_way)
            if window.end is None or now + said.reset_in_seconds >= window.end:  # a window that began after ours
                window.end, window.left = now + said.reset_in_seconds + ROUNDING_S, left
            else:
                window.end = min(window.end, now + said.reset_in_seconds + ROUNDING_S)
                window.left = left if window.left is None else min(window.left, left)

    def _hold(self, window: _Window) -> float | None:
        """Seconds a new request must wait, or None to go now."""
        if window.left is None or window.left > 0 or window.end is None:
            return None
        wait = window.end - self.clock()
        if wait <= 0:
            self._next_window(window)
            return None
        return wait

    @staticmethod
    def _next_window(window: _Window) -> None:
        """The window has ended: the next one has the policy's limit, and ends a window later (or is not known)."""
        if window.limit is not None and window.length is not None and window.end is not None:
            window.end, window.left = window.end + window.length, window.limit
        else:
            window.end = window.left = None

    @staticmethod
    def _take(window: _Window) -> None:
        window.on_the_way += 1
        if window.left is not None:
            window.left = max(0, window.left - 1)


PACER = Pacer()
