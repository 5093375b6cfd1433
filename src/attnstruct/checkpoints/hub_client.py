"""Requests to a model hub that survive what the real one does: redirects to a CDN, rate limits, transient failures.

:func:`get_range` reads one byte range of a file by ``GET`` with ``Range: bytes=A-B`` through ``huggingface_hub``'s
shared client. It follows redirects itself (at most :data:`MAX_REDIRECTS` hops; a relative ``Location`` is resolved
against the URL that sent it): the ``Range`` header goes on every hop, the ``Authorization`` header only to the origin
(scheme, host, port) of the first URL, never to a CDN. Each attempt starts again from the first URL (a CDN's signed
URL may have expired). :func:`call_with_retries` runs one ``huggingface_hub`` API call (``model_info``,
``hf_hub_download``, ``list_repo_refs``) under the same rules.

What is retried, by reason (:data:`REASONS`), and the kind of the one-line
:class:`~attnstruct.checkpoints.extract.blocks.ExtractionError` raised when the bounds are reached:

* ``rate limited``: HTTP 429. The wait is the ``Retry-After`` header (seconds, or an HTTP date), else the reset of the
  IETF ``RateLimit`` header when it says nothing remains, else the backoff below. Kind ``rate limited``.
* ``server error``: HTTP 500, 502, 503, 504. Kind ``error``.
* ``broken transfer``: a connection reset or closed mid-body, or a body shorter than the range asked for while the
  file is long enough. Kind ``truncated``.
* ``timeout``: no connection, or no byte of the answer, within :attr:`RetryPolicy.timeout_s` (the HTTP client's
  timeout, which bounds each wait, not the whole transfer). Kind ``error``.
* ``unreachable``: the connection could not be made. Kind ``error``.

The bounds, per request, of a :class:`RetryPolicy`: at most ``attempts`` requests whatever the reasons, at most
``failures`` retries for reasons other than a rate limit, at most ``total_wait_s`` seconds waited; a wait that would
pass a bound is not begun. When the server names no wait, the n-th retry (from 0) waits a uniform draw from
``[0, min(cap_s, base_s * 2**n))`` ("full jitter"). Any other failure is not retried: other 4xx become the kinds of
:func:`hub_error`. Every retry is counted in a :class:`RetryCounter`. Unless given, the policy and the counter are
:data:`DEFAULT_POLICY` and :data:`DEFAULT_COUNTER`, looked up at each call: a sweep reads and resets the counter, a
test may put a policy that records its waits in the policy's place.
"""

from __future__ import annotations

import email.utils
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

from .extract.blocks import ExtractionError, one_line

REQUEST_TIMEOUT_S = 120.0  # huggingface_hub's shared client has none: a stalled server would hang a sweep
MAX_REDIRECTS = 10
SERVER_ERRORS = (500, 502, 503, 504)
REASONS = ("rate limited", "server error", "broken transfer", "timeout", "unreachable")
_DEFAULT_PORTS = {"http": 80, "https": 443}

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """The bounds of one request's retries and how long to wait between them (module docstring).

    ``rng`` draws the jitter (pass ``random.Random(seed)`` to repeat it); ``sleep`` waits (a test passes a recorder).
    """

    attempts: int = 6
    failures: int = 3
    total_wait_s: float = 300.0
    base_s: float = 1.0
    cap_s: float = 30.0
    timeout_s: float = REQUEST_TIMEOUT_S
    rng: random.Random = field(default_factory=random.Random, compare=False)
    sleep: Callable[[float], object] = field(default=time.sleep, compare=False)

    def __post_init__(self):
        if self.attempts < 1 or self.failures < 0 or min(self.total_wait_s, self.base_s, self.cap_s) < 0:
            raise ValueError(f"a retry policy needs attempts >= 1 and no negative bound: {self}")

    def backoff(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (0 for the first) when the server names no wait."""
        return self.rng.uniform(0.0, min(self.cap_s, self.base_s * 2.0**retry))


class RetryCounter:
    """Retries by reason and seconds waited, over any number of requests and threads."""

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
        """``hub: 7 retries (5 rate limited, 1 server error, 1 broken transfer), 12.0 s waited``, or ``hub: no
        retries``."""
        retries, waited = self.retries, self.waited_s
        total = sum(retries.values())
        if not total:
            return "hub: no retries"
        parts = ", ".join(f"{n} {reason}" for reason, n in retries.items() if n)
        return f"hub: {total} {'retry' if total == 1 else 'retries'} ({parts}), {waited:.1f} s waited"


DEFAULT_POLICY = RetryPolicy()
DEFAULT_COUNTER = RetryCounter()


class _Retryable(Exception):
    """One failed attempt that may be retried: its reason, what went wrong, and the wait the server asked for."""

    def __init__(self, reason: str, detail: str, retry_after: float | None = None):
        super().__init__(detail)
        self.reason, self.detail, self.retry_after = reason, detail, retry_after


class _Attempts:
    """The attempts of one request under a policy; :meth:`retry` waits before the next one or says no."""

    def __init__(self, policy: RetryPolicy, counter: RetryCounter):
        self.policy, self.counter = policy, counter
        self.tries, self.failures, self.waited = 1, 0, 0.0
        self.refused_wait: float | None = None

    def retry(self, failure: _Retryable) -> bool:
        policy = self.policy
        if failure.reason != "rate limited":
            self.failures += 1
        if self.tries >= policy.attempts or self.failures > policy.failures:
            return False
        wait = failure.retry_after if failure.retry_after is not None else policy.backoff(self.tries - 1)
        if self.waited + wait > policy.total_wait_s:
            self.refused_wait = wait
            return False
        self.counter.add(failure.reason, wait)
        policy.sleep(wait)
        self.waited += wait
        self.tries += 1
        return True

    def give_up(self, failure: _Retryable, what: str) -> ExtractionError:
        tries = f"{self.tries} attempt{'s' if self.tries > 1 else ''}, {self.waited:.1f} s waited"
        if self.refused_wait is not None:
            tries += f"; the next wait, {self.refused_wait:.1f} s, would pass {self.policy.total_wait_s:.0f} s"
        if failure.reason == "rate limited":
            return ExtractionError(f"the hub refused {what} (HTTP 429; {tries}): try again later", "rate limited")
        if failure.reason == "broken transfer":
            return ExtractionError(f"the transfer of {what} broke off ({failure.detail}; {tries})", "truncated")
        return ExtractionError(f"cannot read {what} from the hub: {failure.detail} ({tries})")


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds a 429 asks to wait: ``Retry-After`` (seconds or an HTTP date; a past date is 0), else the reset ``t`` of
    ``RateLimit: "api";r=0;t=N``, else None."""
    from huggingface_hub.utils import parse_ratelimit_headers

    value = (headers.get("Retry-After") or "").strip()
    if value.isdigit():
        return float(value)
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - time.time())
    limit = parse_ratelimit_headers(headers)
    return float(limit.reset_in_seconds) if limit is not None and limit.remaining == 0 else None


def _transport_failure(err: Exception) -> _Retryable | None:
    """The retryable failure of a transport error of the HTTP client (None for one not worth retrying)."""
    import httpx2

    if isinstance(err, httpx2.TimeoutException):
        return _Retryable("timeout", f"no answer in time ({one_line(err)})")
    if isinstance(err, httpx2.ConnectError):
        return _Retryable("unreachable", one_line(err))
    if isinstance(err, (httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return _Retryable("broken transfer", one_line(err))
    return None


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)


def _get_once(url: str, start: int, end: int, token: str | bool | None, timeout: float, what: str) -> bytes:
    """One attempt of :func:`get_range`: its redirects followed, raising :class:`_Retryable` or ExtractionError."""
    from huggingface_hub import get_session
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

    hub = _origin(url)
    headers = {**build_hf_headers(token=token), "Range": f"bytes={start}-{end - 1}"}
    elsewhere = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = get_session().get(
                url, headers=headers if _origin(url) == hub else elsewhere, timeout=timeout, follow_redirects=False
            )
        except Exception as err:
            failure = _transport_failure(err)
            if failure is None:
                raise hub_error(err, what) from None
            raise failure from None
        if response.has_redirect_location:
            url = urljoin(url, response.headers["Location"])
            continue
        status = response.status_code
        if status == 429:
            raise _Retryable("rate limited", "HTTP 429", retry_after_s(response.headers))
        if status in SERVER_ERRORS:
            raise _Retryable("server error", f"HTTP {status}")
        try:
            hf_raise_for_status(response)
        except Exception as err:
            raise hub_error(err, what) from None
        if status not in (200, 206):
            raise ExtractionError(f"cannot read {what} from the hub: HTTP {status}")
        return _body(response, start, end, what)
    raise ExtractionError(f"cannot read {what} from the hub: more than {MAX_REDIRECTS} redirects")


def _body(response, start: int, end: int, what: str) -> bytes:
    """Bytes ``[start, end)`` of a 200 (the whole file: a server that ignores Range) or a 206."""
    data = response.content
    size = len(data)
    if response.status_code == 200:
        data = data[start:end]
    else:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        size = int(total) if total.isdigit() else end
    if len(data) == end - start:
        return data
    message = f"{what} sent {len(data)} of the {end - start} bytes asked for at offset {start}"
    if size < end:  # the file itself ends early: asking again gives the same
        raise ExtractionError(message, "truncated")
    raise _Retryable("broken transfer", message)


def get_range(
    url: str,
    start: int,
    end: int,
    *,
    token: str | bool | None,
    what: str | None = None,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
) -> bytes:
    """Bytes ``[start, end)`` of the file at ``url`` (a hub ``/resolve/`` URL), by Range requests under ``policy``
    (module docstring). ``token`` as for ``huggingface_hub.utils.build_hf_headers``; ``what`` names the file in
    errors (the URL's path by default). Raises ExtractionError with a kind, in one line."""
    if end <= start:
        return b""
    policy = policy or DEFAULT_POLICY
    what = what or urlsplit(url).path
    attempts = _Attempts(policy, counter or DEFAULT_COUNTER)
    while True:
        try:
            return _get_once(url, start, end, token, policy.timeout_s, what)
        except _Retryable as failure:
            if not attempts.retry(failure):
                raise attempts.give_up(failure, what) from None


def _call_failure(err: BaseException) -> _Retryable | None:
    """The retryable failure behind a ``huggingface_hub`` error, or its direct cause (``hf_hub_download`` wraps a
    failed metadata request in ``LocalEntryNotFoundError``); None when it is not worth retrying."""
    from huggingface_hub.errors import HfHubHTTPError

    for cause in (err, err.__cause__):
        response = getattr(cause, "response", None)
        if isinstance(cause, HfHubHTTPError) and response is not None:
            if response.status_code == 429:
                return _Retryable("rate limited", "HTTP 429", retry_after_s(response.headers))
            if response.status_code in SERVER_ERRORS:
                return _Retryable("server error", f"HTTP {response.status_code}")
            return None
        if isinstance(cause, Exception) and (failure := _transport_failure(cause)) is not None:
            return failure
    return None


def call_with_retries(
    fn: Callable[[], T], *, what: str, policy: RetryPolicy | None = None, counter: RetryCounter | None = None
) -> T:
    """``fn()``, retried under ``policy`` on a 429 (its ``Retry-After`` honoured), a 5xx or a transport error
    (module docstring); ExtractionError naming ``what`` when the bounds are reached. Any other error is raised
    unchanged. ``fn`` should pass its own timeout where the call takes one (``model_info(timeout=...)``);
    ``hf_hub_download`` also retries a few things itself, with real sleeps, before it raises."""
    attempts = _Attempts(policy or DEFAULT_POLICY, counter or DEFAULT_COUNTER)
    while True:
        try:
            return fn()
        except Exception as err:
            failure = _call_failure(err)
            if failure is None:
                raise
            if not attempts.retry(failure):
                raise attempts.give_up(failure, what) from None


def hub_error(err: BaseException, what: str) -> ExtractionError:
    """The :class:`ExtractionError` of a failed hub request, its kind read from the error's type and HTTP status:
    gated, not found (repository, revision, file), rate limited (429), truncated (a transfer that broke off), or
    error (unreachable, anything else)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    name = type(err).__name__
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, GatedRepoError):
        return ExtractionError(f"{what} needs an accepted licence and a token (HF_TOKEN)", "gated")
    if isinstance(err, RepositoryNotFoundError):
        return ExtractionError(f"{what} (no such repository, or private: set HF_TOKEN)", "not found")
    if isinstance(err, RevisionNotFoundError):
        return ExtractionError(f"{what} (no such revision)", "not found")
    if "EntryNotFound" in name and "Local" not in name:
        return ExtractionError(f"{what} (no such file in the repository)", "not found")
    if status == 429:
        return ExtractionError(f"the hub refused {what} for now (HTTP 429): try again later", "rate limited")
    if "RemoteProtocol" in name or "ReadError" in name or "IncompleteRead" in name:
        return ExtractionError(f"the transfer of {what} broke off ({one_line(err)})", "truncated")
    return ExtractionError(f"cannot read {what} from the hub: {one_line(err)}")
