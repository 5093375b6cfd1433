"""Requests to a model hub that survive what the real one does (redirects to a CDN, rate limits, transient failures)
and are bounded whatever a server does instead (an answer that never ends, a wait of days, a body far larger than
asked for).

Every request to a hub, of the model path and of the corpus path, is a ``GET`` made here through ``huggingface_hub``'s
shared client: :func:`get_range` (one byte range of a file, ``Range: bytes=A-B``), :func:`get_file` (a whole file,
into a file), :func:`get_json` (an API answer) and :func:`get_json_pages` (the pages of a paginated API answer).
Redirects are followed here (at most :data:`MAX_REDIRECTS` hops; a relative ``Location`` is resolved against the URL
that sent it): the ``Range`` header goes on every hop, the ``Authorization`` header only to the origin (scheme, host,
port) of the first URL, never to a CDN. Each attempt starts again from the first URL (a CDN's signed URL may have
expired). ``huggingface_hub``'s own downloads are not used: ``hf_hub_download`` retries a 429 itself, sleeping its
``Retry-After`` however long, and names a file of its cache after the server's ``ETag``.

What is retried, by reason (:data:`REASONS`), and the kind of the one-line
:class:`~attnstruct.checkpoints.extract.blocks.ExtractionError` raised when the bounds are reached:

* ``rate limited``: HTTP 429. The wait is the ``Retry-After`` header (seconds, or an HTTP date), else the reset of the
  IETF ``RateLimit`` header when it says nothing remains, else the backoff. Kind ``rate limited``.
* ``server error``: HTTP 500, 502, 503, 504. Kind ``error``.
* ``broken transfer``: a connection reset or closed mid-body, or a body shorter than the range asked for while the
  file is long enough. Kind ``truncated``.
* ``timeout``: an attempt past its deadline (:meth:`RetryPolicy.deadline_s`: ``timeout_s`` plus the bytes received
  at ``min_rate``; it bounds the whole attempt, connection, headers and body, however slowly they come). Kind
  ``error``.
* ``unreachable``: the connection could not be made. Kind ``error``.

The bounds, per request, are those of a :class:`~attnstruct.checkpoints.hub_retry.RetryPolicy` (at most ``attempts``
requests, ``failures`` retries for reasons other than a rate limit, ``total_wait_s`` seconds waited; a wait that would
pass a bound is not begun). Any other failure is not retried: other 4xx become the kinds of :func:`hub_error`. What
is read is bounded too: a range read stops at its end whatever the server sends (a ``200`` with the whole file to a
``Range`` request is read up to the range's end, then the connection is closed); a file of known size must have that
size; an API answer, or a file whose size the hub did not say, at most :data:`MAX_ANSWER_BYTES`; a paginated answer
at most :data:`MAX_PAGES` pages, each on the first page's origin. Every retry is
counted in a :class:`~attnstruct.checkpoints.hub_retry.RetryCounter`. Unless given, the policy and the counter are
:data:`DEFAULT_POLICY` and :data:`DEFAULT_COUNTER`, looked up at each call: a sweep reads and resets the counter, a
test may put a policy that records its waits (or has shorter deadlines) in the policy's place.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

from ..results import write_atomically
from .extract.blocks import ExtractionError, one_line
from .hub_retry import MIN_RATE, REASONS, REQUEST_TIMEOUT_S, Attempts, Retryable, RetryCounter, RetryPolicy
from .hub_stream import MAX_REDIRECTS, fetch, hub_error, origin, read_range, read_whole, within_deadline

__all__ = [
    "DEFAULT_COUNTER",
    "DEFAULT_POLICY",
    "MAX_ANSWER_BYTES",
    "MAX_PAGES",
    "MAX_REDIRECTS",
    "MIN_RATE",
    "REASONS",
    "REQUEST_TIMEOUT_S",
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

DEFAULT_POLICY = RetryPolicy()
DEFAULT_COUNTER = RetryCounter()

T = TypeVar("T")


def _retried(what: str, policy: RetryPolicy, counter: RetryCounter | None, attempt: Callable[[], T]) -> T:
    """``attempt()`` until it returns, retried under ``policy`` while it raises :class:`Retryable`."""
    attempts = Attempts(policy, counter or DEFAULT_COUNTER)
    while True:
        try:
            return attempt()
        except Retryable as failure:
            if not attempts.retry(failure):
                raise attempts.give_up(failure, what) from None


def _get(url: str, token, headers: dict, policy: RetryPolicy, what: str, read: Callable) -> T:
    """One attempt, within its deadline, of ``GET url``: ``read(response, progress)`` of the answer."""

    def work(progress):
        return fetch(url, token, headers, policy.timeout_s, what, progress, read)

    return within_deadline(policy, work)


def get_range(
    url: str,
    start: int,
    end: int,
    *,
    token: str | bool | None,
    what: str | None = None,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
    most_skipped: int | None = None,
) -> bytes:
    """Bytes ``[start, end)`` of the file at ``url`` (a hub ``/resolve/`` URL), by Range requests under ``policy``
    (module docstring). ``token`` as for ``huggingface_hub.utils.build_hf_headers``; ``what`` names the file in
    errors (the URL's path by default). A server that ignores ``Range`` sends the whole file, which is read up to
    ``end``: with ``most_skipped``, such an answer is refused, before its body is read, when more than that many
    bytes would come before ``start``. Raises ExtractionError with a kind, in one line."""
    if end <= start:
        return b""
    policy = policy or DEFAULT_POLICY
    what = what or urlsplit(url).path
    headers = {"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"}

    def read(response, progress) -> bytes:
        if most_skipped is not None and response.status_code == 200 and start > most_skipped:
            raise ExtractionError(
                f"the hub answered a Range request for bytes {start}-{end - 1} of {what} with the whole file "
                f"(HTTP 200): {start} bytes would come before them, more than the {most_skipped} read to reach a range"
            )
        return read_range(response, start, end, what, progress)

    return _retried(what, policy, counter, lambda: _get(url, token, headers, policy, what, read))


def get_json(
    url: str,
    *,
    token: str | bool | None,
    what: str,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
):
    """The JSON answer of the hub's API at ``url`` (query included), at most :data:`MAX_ANSWER_BYTES`, under
    ``policy``. ExtractionError in one line for an answer that is not JSON."""
    policy = policy or DEFAULT_POLICY

    def read(response, progress) -> bytes:
        return _answer(response, progress, what)

    body = _retried(what, policy, counter, lambda: _get(url, token, {}, policy, what, read))
    return _json(body, what)


def get_json_pages(
    url: str,
    *,
    token: str | bool | None,
    what: str,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
) -> Iterator:
    """The JSON answer of each page of a paginated listing of the hub's API: the one at ``url``, then the one each
    page names by its ``Link: <URL>; rel="next"`` header (GitHub's convention, which the Hub follows and
    ``huggingface_hub.utils._pagination`` reads), each as :func:`get_json` reads it. ExtractionError in one line,
    before it is asked for, for a next page on another origin than ``url``'s (it would get the token) or past
    :data:`MAX_PAGES` (read at each call) pages."""
    policy = policy or DEFAULT_POLICY
    most, pages, first = MAX_PAGES, 0, url

    def page(response, progress) -> tuple[bytes, str | None]:
        return _answer(response, progress, what), response.links.get("next", {}).get("url")

    while url is not None:
        if pages == most:
            raise ExtractionError(f"the hub's listing of {what} goes on past {most} pages")
        pages += 1
        body, following = _retried(what, policy, counter, lambda url=url: _get(url, token, {}, policy, what, page))
        yield _json(body, what)
        url = urljoin(url, following) if following else None
        if url is not None and origin(url) != origin(first):
            there = "{}://{}".format(*urlsplit(url)[:2])
            raise ExtractionError(f"the hub's listing of {what} names its next page on {there}, another origin")


def _answer(response, progress, what: str) -> bytes:
    """The body of an API answer, at most :data:`MAX_ANSWER_BYTES`."""
    body = bytearray()
    read_whole(response, body.extend, None, MAX_ANSWER_BYTES, what, progress)
    return bytes(body)


def _json(body: bytes, what: str):
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, or nested without end
        raise ExtractionError(f"the hub's answer for {what} is not JSON ({one_line(err)})") from None


def get_file(
    url: str,
    path: str | os.PathLike,
    *,
    token: str | bool | None,
    what: str,
    size: int | None = None,
    policy: RetryPolicy | None = None,
    counter: RetryCounter | None = None,
) -> Path:
    """The whole file at ``url`` written to ``path`` (its folder made if need be), under ``policy``: exactly
    ``size`` bytes when given, else at most :data:`MAX_ANSWER_BYTES`. Each attempt writes a temporary file of its own
    beside ``path`` (:func:`attnstruct.results.write_atomically`), renamed to ``path`` only when complete; a disk
    that takes no more (full, read-only) is that writer's :class:`~attnstruct.results.OutputError`."""
    policy = policy or DEFAULT_POLICY

    def attempt(part: str) -> None:
        with open(part, "r+b") as sink:  # made by write_atomically, which removes it if the attempt fails

            def read(response, progress) -> None:
                read_whole(response, sink.write, size, MAX_ANSWER_BYTES, what, progress)

            _get(url, token, {}, policy, what, read)

    return _retried(what, policy, counter, lambda: write_atomically(path, attempt))
