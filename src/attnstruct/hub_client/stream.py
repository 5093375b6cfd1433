"""One attempt of a hub request (:mod:`attnstruct.hub_client.client`): the ``GET`` and its redirects, the answer
read within bounds, and the attempt's deadline kept.

:func:`within_deadline` runs an attempt in a thread of its own and gives it up (a ``timeout``
:class:`~attnstruct.hub_client.retry.Retryable`) at the first moment it has taken longer than the policy's
:meth:`~attnstruct.hub_client.retry.RetryPolicy.deadline_s` of the bytes it has had: the HTTP client's timeout
bounds each read, not the answer, so a server that sends a byte every few seconds, of the headers or of the body,
would otherwise be waited for without end. The thread given up stops at its next byte (:class:`Progress`); one that
the server keeps waiting for a byte ends with the server's connection. :func:`fetch` is the attempt: the ``GET``, its
redirects (the token only to the hub's origin, :attr:`Route.home`), the status read into a retryable failure or a
one-line :class:`~attnstruct.hub_client.failures.HubError` of its kind (:func:`hub_error`), and the
body read by :func:`read_range` or :func:`read_whole`, which never read more than they were asked for. A
:class:`Route` says where the attempt begins and what each hop is told (counting, pacing), and keeps where it ended.

Statuses that say more than their number: a 416 whose ``Content-Range: bytes */N`` disagrees with the size the hub
lists for the file is a CDN's error, not the file's (``huggingface/datasets#7685``: ``bytes */177`` on valid ranges,
now and then) and is retried as a ``server error``; one that agrees is a one-line error. A 401 "Invalid credentials
in Authorization header" to a request that sent a token is kind ``invalid token`` (the Hub sends it for a stale
token on every request, public repositories too; ``huggingface_hub/utils/_http.py`` singles the message out). A
refusal (400, 401, 403) of a signed link kept from an earlier request is :class:`StaleLink`: resolve again.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

from ..untrusted import one_line
from .failures import HubError
from .retry import Retryable, RetryPolicy, retry_after_s

MAX_REDIRECTS = 10
SERVER_ERRORS = (500, 502, 503, 504)
ERROR_BODY_BYTES = 1 << 16  # of an error answer, what is read for its message
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", re.ASCII | re.IGNORECASE)
_UNSATISFIED_RANGE = re.compile(r"bytes\s+\*/(\d+)", re.ASCII | re.IGNORECASE)
INVALID_TOKEN = "Invalid credentials in Authorization header"

T = TypeVar("T")


class Cancelled(Exception):
    """The attempt was given up by the thread that waited for it."""


class StaleLink(Exception):
    """A signed link kept from an earlier request was refused by its server: drop it and resolve again."""


@dataclass
class Route:
    """Where one attempt goes: ``home``, the hub's origin (the only one the token goes to); ``size``, the file's size
    when the hub listed it (a 416 that disagrees is retried); ``via_link``, whether the first URL is a signed link
    kept from an earlier request (a refusal there is :class:`StaleLink`); ``hop(url)``, called before each request of
    the attempt, and ``answered(url, headers)``, after each answer. ``final`` is the URL of the successful answer."""

    home: tuple[str, str, int]
    size: int | None = None
    via_link: bool = False
    hop: Callable[[str], object] | None = None
    answered: Callable[[str, Mapping[str, str]], object] | None = None
    final: str | None = None


class Progress:
    """What an attempt has received, and whether it was given up (then the next :meth:`add` raises
    :class:`Cancelled`)."""

    def __init__(self):
        self.received = 0
        self.cancelled = threading.Event()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def add(self, n: int) -> None:
        self.check()
        self.received += n


def within_deadline(policy: RetryPolicy, work: Callable[[Progress], T]) -> T:
    """``work(progress)``, run in a daemon thread, or a ``timeout`` :class:`Retryable` once it has taken longer than
    ``policy.deadline_s(progress.received)`` seconds (module docstring)."""
    progress = Progress()
    outcome: list[tuple[bool, object]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, work(progress)))
        except BaseException as err:  # handed to the waiting thread
            outcome.append((False, err))
        finally:
            done.set()

    began = time.monotonic()
    threading.Thread(target=run, name="attnstruct-hub-request", daemon=True).start()
    try:
        while not done.wait(max(0.0, began + policy.deadline_s(progress.received) - time.monotonic())):
            if time.monotonic() - began >= policy.deadline_s(progress.received):
                received = progress.received
                detail = (
                    f"no answer within {policy.timeout_s:g} s"
                    if not received
                    else f"{received} bytes in {time.monotonic() - began:.1f} s, slower than {policy.min_rate:g} "
                    f"bytes/s after the first {policy.timeout_s:g} s"
                )
                raise Retryable("timeout", detail)
    finally:
        if not done.is_set():
            progress.cancelled.set()
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def transport_failure(err: Exception, timeout: float, received: int = 0) -> Retryable | None:
    """The retryable failure of a transport error of the HTTP client (None for one not worth retrying). The client's
    own timeout (``timeout`` seconds without a byte) races the attempt's deadline, which says the same in the same
    words when nothing came (:func:`within_deadline`)."""
    import httpx2

    if isinstance(err, httpx2.TimeoutException):
        if not received:
            return Retryable("timeout", f"no answer within {timeout:g} s")
        return Retryable("timeout", f"no byte for {timeout:g} s after {received} bytes")
    if isinstance(err, httpx2.ConnectError):
        return Retryable("unreachable", one_line(err))
    if isinstance(err, (httpx2.NetworkError, httpx2.RemoteProtocolError)):
        return Retryable("broken transfer", one_line(err))
    return None


def origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)


def _refusal(response, token, what: str, progress: Progress) -> HubError:
    """The error of a final answer that is not a success, read from its status and ``X-Error-Code`` by
    ``huggingface_hub``'s own rules (on a copy holding at most :data:`ERROR_BODY_BYTES` of its body); a stale token's
    401 is :func:`token_refused`."""
    import httpx2
    from huggingface_hub.utils import hf_raise_for_status

    body = bytearray()
    for chunk in response.iter_bytes():
        progress.add(len(chunk))
        body += chunk
        if len(body) >= ERROR_BODY_BYTES:
            break
    sent_token = "authorization" in response.request.headers
    if response.status_code == 401 and sent_token and _error_message(response.headers, bytes(body)) == INVALID_TOKEN:
        return token_refused(token)
    skip = ("content-encoding", "content-length", "transfer-encoding")
    headers = [(key, value) for key, value in response.headers.items() if key.lower() not in skip]
    copy = httpx2.Response(response.status_code, headers=headers, content=bytes(body), request=response.request)
    try:
        hf_raise_for_status(copy)
    except Exception as err:
        return hub_error(err, what)
    return HubError(f"cannot read {what} from the hub: HTTP {response.status_code}")


def _error_message(headers: Mapping[str, str], body: bytes) -> str:
    """The message of a hub's error answer: its ``X-Error-Message`` header, else the ``error`` of its JSON body."""
    message = headers.get("X-Error-Message")
    if message is None:
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            answer = None
        message = answer.get("error") if isinstance(answer, dict) else None
    return message.strip() if isinstance(message, str) else ""


def token_refused(token) -> HubError:
    """The one line of a token the hub refuses, naming where it came from, never the token."""
    from_env = bool(os.environ.get("HF_TOKEN")) and (token is True or token == os.environ.get("HF_TOKEN"))
    where, remedy = (
        ("HF_TOKEN", "unset HF_TOKEN (or set it to a valid token)")
        if from_env
        else ("the saved login", "run `hf auth logout` (or log in again with `hf auth login`)")
    )
    return HubError(f"the hub refuses the token from {where} (HTTP 401: {INVALID_TOKEN}); {remedy}", "invalid token")


def _unsatisfiable(response, size: int | None, what: str, asked: str | None) -> Exception:
    """A 416: retried (``server error``) when the size its ``Content-Range`` gives is not the size the hub lists,
    else a one-line error."""
    said = response.headers.get("Content-Range")
    match = _UNSATISFIED_RANGE.fullmatch((said or "").strip())
    if size is not None and (match is None or int(match[1]) != size):
        return Retryable(
            "server error", f"HTTP 416 to {asked} with Content-Range {said!r}, but {what} has {size} bytes"
        )
    total = f"its {match[1]} bytes" if match else "the file"
    return HubError(f"the hub says {asked} of {what} lies outside {total} (HTTP 416)")


def request_headers(token) -> dict[str, str]:
    """What every request to a hub carries: ``User-Agent``, and ``Authorization: Bearer TOKEN`` when there is a token
    (``token`` as for ``huggingface_hub.utils.build_hf_headers``: None or True for the one ``HF_TOKEN`` or the saved
    login holds, False for none). Made here, not by ``build_hf_headers``, which to fill its user agent asks the hub
    for its list of agent harnesses (``GET /api/agent-harnesses``, ``huggingface_hub/utils/_detect_agent.py``): a call
    of the metered API bucket outside this module's count and pacing, waited for up to 3 s on a stalled hub."""
    import platform

    from huggingface_hub import get_token

    from .._version import __version__

    found = get_token() if token is None or token is True else token or None
    headers = {"User-Agent": f"attnstruct/{__version__}; python/{platform.python_version()}"}
    if found:
        headers["Authorization"] = f"Bearer {found}"
    return headers


@contextmanager
def _opened(url: str, token, headers: dict, timeout: float, what: str, progress: Progress, route: Route) -> Iterator:
    """The successful (200 or 206) answer to ``GET url``, redirects followed, streamed; closed on leaving."""
    from huggingface_hub import get_session

    client = get_session()
    sent = {**request_headers(token), **headers}
    elsewhere = {key: value for key, value in sent.items() if key.lower() != "authorization"}
    for _ in range(MAX_REDIRECTS + 1):
        progress.check()
        if route.hop is not None:
            route.hop(url)
        there = origin(url)
        request = client.build_request("GET", url, headers=sent if there == route.home else elsewhere, timeout=timeout)
        response = client.send(request, stream=True, follow_redirects=False)
        try:
            if route.answered is not None:
                route.answered(url, response.headers)
            if response.has_redirect_location:
                url = urljoin(url, response.headers["Location"])
                continue
            status = response.status_code
            if status == 429:
                raise Retryable("rate limited", "HTTP 429", retry_after_s(response.headers))
            if status in SERVER_ERRORS:
                raise Retryable("server error", f"HTTP {status}")
            if route.via_link and there != route.home and status in (400, 401, 403):
                raise StaleLink(f"HTTP {status}")
            if status == 416:
                raise _unsatisfiable(response, route.size, what, headers.get("Range"))
            if status not in (200, 206):
                raise _refusal(response, token, what, progress)
            route.final = url
            yield response
            return
        finally:
            response.close()
    raise HubError(f"cannot read {what} from the hub: more than {MAX_REDIRECTS} redirects")


def fetch(
    url: str, token, headers: dict, timeout: float, what: str, progress: Progress, read: Callable, route: Route
) -> T:
    """One attempt: ``read(response, progress)`` of the successful answer to ``GET url`` (redirects followed). Raises
    :class:`Retryable` for what may pass, :class:`~attnstruct.hub_client.failures.HubError` for what
    will not."""
    import httpx2

    try:
        with _opened(url, token, headers, timeout, what, progress, route) as response:
            return read(response, progress)
    except (httpx2.HTTPError, httpx2.InvalidURL) as err:
        failure = transport_failure(err, timeout, progress.received)
        if failure is None:
            raise hub_error(err, what) from None
        raise failure from None


def read_range(response, start: int, end: int, what: str, progress: Progress) -> bytes:
    """Bytes ``[start, end)`` of a file from the answer to ``Range: bytes=start-(end-1)``: a 206 that begins at
    ``start``, or a 200 with the whole file (a server may ignore ``Range``), read up to ``end`` and no further. The
    bytes as sent: an answer encoded (``Content-Encoding: gzip``) despite ``Accept-Encoding: identity`` is refused."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise HubError(f"the hub sent bytes {start}-{end - 1} of {what} {encoding}-encoded")
    size = None
    skip = start
    if response.status_code == 206:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
        if match is None or int(match[1]) != start:
            sent = response.headers.get("Content-Range")
            raise HubError(f"the hub answered bytes {start}-{end - 1} of {what} with Content-Range {sent!r}")
        skip, size = 0, None if match[3] == "*" else int(match[3])
    data = bytearray()
    for chunk in response.iter_raw():
        progress.add(len(chunk))
        if skip:
            cut = min(skip, len(chunk))
            chunk, skip = chunk[cut:], skip - cut
        data += chunk[: end - start - len(data)]
        if len(data) == end - start:
            return bytes(data)
    if response.status_code == 200:
        size = start - skip + len(data)  # the whole file came
    message = f"{what} sent {len(data)} of the {end - start} bytes asked for at offset {start}"
    if size is not None and size < end:  # the file itself ends early: asking again gives the same
        raise HubError(message, "truncated")
    raise Retryable("broken transfer", message)


def read_whole(response, write: Callable[[bytes], object], size: int | None, limit: int, what: str, progress) -> int:
    """The body of a 200 (decoded as its ``Content-Encoding`` says), handed to ``write`` chunk by chunk: exactly
    ``size`` bytes when the size is known, else at most ``limit``. Returns the length."""
    if response.status_code != 200:
        raise HubError(f"cannot read {what} from the hub: HTTP {response.status_code} to a request for all of it")
    most = size if size is not None else limit
    length = 0
    for chunk in response.iter_bytes():
        progress.add(len(chunk))
        length += len(chunk)
        if length > most:
            said = "the size the hub lists for it" if size is not None else "the most attnstruct reads of an answer"
            raise HubError(f"the hub sent more than {most} bytes of {what}, {said}")
        write(chunk)
    if size is not None and length != size:
        raise HubError(f"the hub sent {length} of the {size} bytes of {what}", "truncated")
    return length


def hub_error(err: BaseException, what: str) -> HubError:
    """The :class:`HubError` of a failed hub request, its kind read from the error's type and HTTP status:
    gated, not found (repository, revision, file), rate limited (429), truncated (a transfer that broke off), offline
    (the hub could not be reached: DNS, a refused connection), or error (anything else)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    name = type(err).__name__
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, GatedRepoError):
        return HubError(f"{what} needs an accepted licence and a token (HF_TOKEN)", "gated")
    if isinstance(err, RepositoryNotFoundError):
        return HubError(f"{what} (no such repository, or private: set HF_TOKEN)", "not found")
    if isinstance(err, RevisionNotFoundError):
        return HubError(f"{what} (no such revision)", "not found")
    if "EntryNotFound" in name and "Local" not in name:
        return HubError(f"{what} (no such file in the repository)", "not found")
    if status == 429:
        return HubError(f"the hub refused {what} for now (HTTP 429): try again later", "rate limited")
    if "ConnectError" in name or "ConnectionError" in name or "NameResolution" in name:
        return HubError(f"the hub could not be reached for {what} ({one_line(err)})", "offline")
    if "RemoteProtocol" in name or "ReadError" in name or "IncompleteRead" in name:
        return HubError(f"the transfer of {what} broke off ({one_line(err)})", "truncated")
    return HubError(f"cannot read {what} from the hub: {one_line(err)}")
