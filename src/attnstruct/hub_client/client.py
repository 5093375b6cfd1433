"""Requests to a model hub that survive what the real one does (redirects to a CDN, quotas, signed links that expire,
transient failures and spurious errors) and are bounded whatever a server does instead (an answer that never ends, a
wait of days, a body far larger than asked for).

Every request to a hub, of the model path and of the corpus path, is a ``GET`` made here through ``huggingface_hub``'s
shared client: :func:`get_range` (one byte range of a file, ``Range: bytes=A-B``), :func:`get_file` (a whole file,
into a file), :func:`get_json` (an API answer) and :func:`get_json_pages` (the pages of a paginated API answer), each
with ``Accept-Encoding: identity`` (a CDN may answer a Range request that accepts gzip with the whole file:
``huggingface_hub`` PR #3778) and its body streamed. Redirects are followed here (at most :data:`MAX_REDIRECTS` hops;
a relative ``Location`` is resolved against the URL that sent it): the ``Range`` header goes on every hop, the
``Authorization`` header only to the origin (scheme, host, port) of the first URL, never to a CDN.
``huggingface_hub``'s own downloads are not used, nor ``hf_xet``, whatever headers a redirect carries:
``hf_hub_download`` retries a 429 itself, sleeping its ``Retry-After`` however long, and names a file of its cache
after the server's ``ETag``.

Few requests, and paced (:mod:`attnstruct.hub_client.quota`, :mod:`attnstruct.hub_client.links`): the
signed link a ``/resolve/`` URL redirects to on another origin is kept (:data:`~.links.LINKS`) and later requests
of that URL go straight to it while it is valid; a kept link its server refuses (400, 401, 403) is dropped and the
URL resolved again, once, at no cost to the retry bounds. Every hop of every attempt is counted by bucket in
:data:`DEFAULT_CALLS` and in the ``calls`` counter a caller passes, and its answer's ``RateLimit`` headers are read by
the process's pacer (:data:`~.quota.PACER`), which holds a request before it begins when its bucket's window has
nothing left (a hold counted as ``paced``, and bounded by the policy's total wait).

What is retried, by reason (:data:`REASONS`), and the kind of the one-line
:class:`~attnstruct.hub_client.failures.HubError` raised when the bounds are reached:

* ``rate limited``: HTTP 429. The wait is the ``Retry-After`` header (seconds, or an HTTP date), else the reset of the
  IETF ``RateLimit`` header plus a second when it says nothing remains, else the backoff; at least a second. Kind
  ``rate limited``.
* ``server error``: HTTP 500, 502, 503, 504, and a 416 whose ``Content-Range`` disagrees with the file's size as the
  hub lists it (``size``). Kind ``error``.
* ``broken transfer``: a connection reset or closed mid-body, or a body shorter than the range asked for while the
  file is long enough. Kind ``truncated``.
* ``timeout``: an attempt past its deadline (:meth:`RetryPolicy.deadline_s`: ``timeout_s`` plus the bytes received
  at ``min_rate``; it bounds the whole attempt, connection, headers and body, however slowly they come). Kind
  ``error``.
* ``unreachable``: the connection could not be made (DNS, a refused or failed connection). Kind ``offline``.

The bounds, per request, are those of a :class:`~attnstruct.hub_client.retry.RetryPolicy` (``failures``
retries for reasons other than a rate limit, ``total_wait_s`` seconds waited in all, two of the Hub's windows by
default; a wait that would pass a bound is not begun). Any other failure is not retried: other 4xx become the kinds of
:func:`hub_error`, and a 401 that refuses the token itself is kind ``invalid token``. What is read is bounded too: a
range read stops at its end whatever the server sends, and a ``200`` with the whole file to a ``Range`` request is
refused before its body when more than ``most_skipped`` bytes (:data:`RANGE_SLACK` by default) would come before the
range; a file of known size must have that size; an API answer, or a file whose size the hub did not say, at most
:data:`MAX_ANSWER_BYTES`; a paginated answer at most :data:`MAX_PAGES` pages, each on the first page's origin. Every
retry is counted in a :class:`~attnstruct.hub_client.retry.RetryCounter`. Unless given, the policy and the
counters are :data:`DEFAULT_POLICY`, :data:`DEFAULT_COUNTER` and :data:`DEFAULT_CALLS`, looked up at each call: a
sweep reads and resets the counters, a test may put a policy that records its waits (or has shorter deadlines) in the
policy's place.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

from ..results import write_atomically
from ..untrusted import one_line
from . import links, quota
from .failures import HubError
from .quota import CallCounter, bucket_of
from .retry import MIN_RATE, REASONS, REQUEST_TIMEOUT_S, Attempts, Retryable, RetryCounter, RetryPolicy
from .stream import (
    MAX_REDIRECTS,
    Route,
    StaleLink,
    fetch,
    hub_error,
    origin,
    read_range,
    read_whole,
    within_deadline,
)

__all__ = [
    "DEFAULT_CALLS",
    "DEFAULT_COUNTER",
    "DEFAULT_POLICY",
    "MAX_ANSWER_BYTES",
    "MAX_PAGES",
    "MAX_REDIRECTS",
    "MIN_RATE",
    "RANGE_SLACK",
    "REASONS",
    "REQUEST_TIMEOUT_S",
    "CallCounter",
    "RetryCounter",
    "RetryPolicy",
    "get_file",
    "get_json",
    "get_json_pages",
    "get_range",
    "hub_error",
]

MAX_ANSWER_BYTES = 64 << 20  # an API answer, or a file whose size the hub did not say (config.json, an index)
MAX_PAGES = 1000  # of one paginated answer: a million entries at the Hub's 1000 a page
RANGE_SLACK = 64 << 10  # bytes of a whole-file answer to a Range request read at most before the range

DEFAULT_POLICY = RetryPolicy()
DEFAULT_COUNTER = RetryCounter()
DEFAULT_CALLS = CallCounter()
_IDENTITY = {"Accept-Encoding": "identity"}

T = TypeVar("T")


def _retried(what: str, policy: RetryPolicy, counter: RetryCounter | None, attempt: Callable[[Attempts], T]) -> T:
    """``attempt(attempts)`` until it returns, retried under ``policy`` while it raises :class:`Retryable`."""
    attempts = Attempts(policy, counter or DEFAULT_COUNTER)
    while True:
        try:
            return attempt(attempts)
        except Retryable as failure:
            if not attempts.retry(failure):
                raise attempts.give_up(failure, what) from None


_THREAD = threading.local()  # the counter of the block of :func:`counting` this thread is in


@contextmanager
def counting(calls: CallCounter) -> Iterator[CallCounter]:
    """Every request this thread makes in the block is counted in ``calls`` too (once, whoever else counts it): the
    requests of opening one checkpoint, whichever function makes them."""
    outer = getattr(_THREAD, "calls", None)
    _THREAD.calls = calls
    try:
        yield calls
    finally:
        _THREAD.calls = outer


class _Meter:
    """What one attempt's hops are told: each counted by bucket and by the process's pacer, its answer's
    ``RateLimit`` read. The first hop is let go by :meth:`admit`, before the attempt; later ones (redirects) are let
    go without a hold, as the attempt's deadline runs. :meth:`close` tells the pacer of the hops left unanswered."""

    def __init__(self, home: tuple[str, str, int], calls: CallCounter | None):
        self.home, self.pacer = home, quota.PACER
        found = (DEFAULT_CALLS, calls, getattr(_THREAD, "calls", None))
        self.counters = list({id(counter): counter for counter in found if counter is not None}.values())
        self.hops, self.waiting, self.closed = 0, [], False
        self._lock = threading.Lock()

    def key(self, url: str) -> tuple:
        there = origin(url)
        return there, bucket_of(url, self.home, there)

    def admit(self, url: str, attempts: Attempts) -> None:
        key = self.key(url)
        attempts.paced(self.pacer.admit(key, attempts.policy.sleep, attempts.budget_s))
        with self._lock:
            self.waiting.append(key)

    def hop(self, url: str) -> None:
        key = self.key(url)
        for counter in self.counters:
            counter.add(key[1])
        with self._lock:
            if self.hops:  # the first was let go by admit
                self.pacer.take(key)
                self.waiting.append(key)
            self.hops += 1

    def answered(self, url: str, headers) -> None:
        key = self.key(url)
        with self._lock:
            if self.closed or key not in self.waiting:
                return
            self.waiting.remove(key)
            self.pacer.answered(key, headers)

    def close(self) -> None:
        with self._lock:
            self.closed, waiting, self.waiting = True, self.waiting, []
        for key in waiting:
            self.pacer.release(key)


def _get(
    url: str,
    token,
    headers: dict,
    what: str,
    read: Callable,
    attempts: Attempts,
    calls: CallCounter | None,
    size: int | None = None,
) -> T:
    """One attempt, within its deadline, of ``GET url``: ``read(response, progress)`` of the answer. A ``/resolve/``
    URL goes to the signed link it led to before while that is valid (module docstring)."""
    policy, home = attempts.policy, origin(url)
    key = links.link_key(url, token) if "/resolve/" in urlsplit(url).path else None
    link = links.LINKS.get(key) if key is not None else None
    while True:
        first, meter = link or url, _Meter(home, calls)
        route = Route(home, size=size, via_link=link is not None, hop=meter.hop, answered=meter.answered)
        meter.admit(first, attempts)

        def work(progress, first=first, route=route):
            return fetch(first, token, headers, policy.timeout_s, what, progress, read, route)

        try:
            result = within_deadline(policy, work)
        except StaleLink:  # a kept link refused: resolve again, once (no link is kept now), at no retry's cost
            links.LINKS.drop(key)
            link = None
            continue
        finally:
            meter.close()
        if key is not None and link is None and route.final is not None and origin(route.final) != home:
            links.LINKS.put(key, route.final)
        return result


def get_range(
    url: str,
    start: int,
    end: int,
    *,
    token: str | bool | None,
    what: str | None = None,
    size: int | None = None,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
    calls: CallCounter | None = None,
    most_skipped: int | None = RANGE_SLACK,
) -> bytes:
    """Bytes ``[start, end)`` of the file at ``url`` (a hub ``/resolve/`` URL), by Range requests under ``policy``
    (module docstring). ``token`` as for ``huggingface_hub.utils.build_hf_headers``; ``what`` names the file in
    errors (the URL's path by default); ``size``, the file's size as the hub lists it, tells a CDN's spurious 416 from
    a range past the end. A server that ignores ``Range`` sends the whole file, which is read up to ``end``; such an
    answer is refused, before its body is read, when more than ``most_skipped`` bytes would come before ``start``
    (None: no bound). Raises HubError with a kind, in one line."""
    if end <= start:
        return b""
    what = what or urlsplit(url).path
    headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}

    def read(response, progress) -> bytes:
        if most_skipped is not None and response.status_code == 200 and start > most_skipped:
            raise HubError(
                f"the hub answered a Range request for bytes {start}-{end - 1} of {what} with the whole file "
                f"(HTTP 200): {start} bytes would come before them, more than the {most_skipped} read to reach a range"
            )
        return read_range(response, start, end, what, progress)

    def attempt(attempts: Attempts) -> bytes:
        return _get(url, token, headers, what, read, attempts, calls, size)

    return _retried(what, policy or DEFAULT_POLICY, counter, attempt)


def get_json(
    url: str,
    *,
    token: str | bool | None,
    what: str,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
    calls: CallCounter | None = None,
):
    """The JSON answer of the hub's API at ``url`` (query included), at most :data:`MAX_ANSWER_BYTES`, under
    ``policy``. HubError in one line for an answer that is not JSON."""

    def read(response, progress) -> bytes:
        return _answer(response, progress, what)

    def attempt(attempts: Attempts) -> bytes:
        return _get(url, token, _IDENTITY, what, read, attempts, calls)

    return _json(_retried(what, policy or DEFAULT_POLICY, counter, attempt), what)


def get_json_pages(
    url: str,
    *,
    token: str | bool | None,
    what: str,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
    calls: CallCounter | None = None,
) -> Iterator:
    """The JSON answer of each page of a paginated listing of the hub's API: the one at ``url``, then the one each
    page names by its ``Link: <URL>; rel="next"`` header (GitHub's convention, which the Hub follows and
    ``huggingface_hub.utils._pagination`` reads), each as :func:`get_json` reads it. HubError in one line,
    before it is asked for, for a next page on another origin than ``url``'s (it would get the token) or past
    :data:`MAX_PAGES` (read at each call) pages."""
    policy = policy or DEFAULT_POLICY
    most, pages, first = MAX_PAGES, 0, url

    def page(response, progress) -> tuple[bytes, str | None]:
        return _answer(response, progress, what), response.links.get("next", {}).get("url")

    while url is not None:
        if pages == most:
            raise HubError(f"the hub's listing of {what} goes on past {most} pages")
        pages += 1
        body, following = _retried(
            what, policy, counter, lambda attempts, url=url: _get(url, token, _IDENTITY, what, page, attempts, calls)
        )
        yield _json(body, what)
        url = urljoin(url, following) if following else None
        if url is not None and origin(url) != origin(first):
            there = "{}://{}".format(*urlsplit(url)[:2])
            raise HubError(f"the hub's listing of {what} names its next page on {there}, another origin")


def _answer(response, progress, what: str) -> bytes:
    """The body of an API answer, at most :data:`MAX_ANSWER_BYTES`."""
    body = bytearray()
    read_whole(response, body.extend, None, MAX_ANSWER_BYTES, what, progress)
    return bytes(body)


def _json(body: bytes, what: str):
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, or nested without end
        raise HubError(f"the hub's answer for {what} is not JSON ({one_line(err)})") from None


def get_file(
    url: str,
    path: str | os.PathLike,
    *,
    token: str | bool | None,
    what: str,
    size: int | None = None,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
    calls: CallCounter | None = None,
) -> Path:
    """The whole file at ``url`` written to ``path`` (its folder made if need be), under ``policy``: exactly
    ``size`` bytes when given, else at most :data:`MAX_ANSWER_BYTES`. Each attempt writes a temporary file of its own
    beside ``path`` (:func:`attnstruct.results.write_atomically`), renamed to ``path`` only when complete; a disk
    that takes no more (full, read-only) is that writer's :class:`~attnstruct.results.OutputError`. Plain HTTP
    whatever the redirect says (``X-Xet-Hash`` and the like): ``hf_xet`` is never asked."""

    def attempt(attempts: Attempts) -> Path:
        def into(part: str) -> None:
            with open(part, "r+b") as sink:  # made by write_atomically, which removes it if the attempt fails

                def read(response, progress) -> None:
                    read_whole(response, sink.write, size, MAX_ANSWER_BYTES, what, progress)

                _get(url, token, _IDENTITY, what, read, attempts, calls, size)

        return write_atomically(path, into)

    return _retried(what, policy or DEFAULT_POLICY, counter, attempt)
