"""Signed CDN links kept while they are valid, so that a file is resolved once, not once per byte range.

The Hub answers ``GET /{repo}/resolve/{commit}/{file}`` of a large file with a redirect to a signed URL on a CDN
(``cas-bridge.xethub.hf.co``, an S3-style query with ``X-Amz-Date`` and ``X-Amz-Expires=3600``;
``huggingface/datasets#7685`` shows one), and every ``/resolve/`` request counts against the metered "resolvers"
quota (hub-docs, ``docs/hub/rate-limits.md``). A resolve URL holds the commit, so it always leads to the same bytes:
:class:`LinkCache` keeps the link each one led to, per token (a link granted to one token is not used for another),
and hands it back until :data:`MARGIN_S` seconds before it expires. Its expiry is read from the link itself
(:func:`link_expiry`): ``X-Amz-Date`` + ``X-Amz-Expires``, else a CloudFront ``Expires=`` (seconds since the
epoch), else :data:`DEFAULT_TTL_S` after it was had. A link the CDN refuses (it expired early, or was revoked) is
dropped by the caller (:meth:`LinkCache.drop`), which resolves again. The cache is bounded (least recently used out
first, :data:`MAX_LINKS`); :data:`LINKS` is the one of the process.
"""

from __future__ import annotations

import calendar
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

MARGIN_S = 60.0  # a link is not used in its last minute: a request may take that long to reach the CDN
DEFAULT_TTL_S = 3600.0  # a link that says nothing of its expiry: the hour the Hub's signed links are valid
MAX_LINKS = 4096


def link_expiry(link: str, had_at: float) -> float:
    """When ``link`` (had at ``had_at``, seconds since the epoch) stops being valid, in seconds since the epoch."""
    query = {key.lower(): values[-1] for key, values in parse_qs(urlsplit(link).query).items()}
    date, expires = query.get("x-amz-date", ""), query.get("x-amz-expires", "")
    if expires.isascii() and expires.isdigit():
        try:
            signed = calendar.timegm(time.strptime(date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            signed = None
        if signed is not None:
            return signed + float(expires)
    cloudfront = query.get("expires", "")
    if cloudfront.isascii() and cloudfront.isdigit():
        return float(cloudfront)
    return had_at + DEFAULT_TTL_S


def link_key(url: str, token) -> tuple[str, str]:
    """The key of a resolve URL asked with ``token`` (a digest of it: the token itself is not kept)."""
    if isinstance(token, str) and token:
        who = hashlib.sha256(token.encode()).hexdigest()[:16]
    else:
        who = "saved login" if token is True else ""
    return url, who


class LinkCache:
    """The signed link each resolve URL led to, with its expiry; thread-safe. ``clock`` gives seconds since the
    epoch (a test passes a fake one)."""

    def __init__(self, clock: Callable[[], float] = time.time, size: int = MAX_LINKS):
        self.clock, self.size = clock, size
        self._lock = threading.Lock()
        self._links: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()

    def get(self, key: tuple[str, str]) -> str | None:
        """The link kept for ``key`` while it has more than :data:`MARGIN_S` seconds left, else None."""
        with self._lock:
            kept = self._links.get(key)
            if kept is None:
                return None
            if kept[1] - MARGIN_S <= self.clock():
                del self._links[key]
                return None
            self._links.move_to_end(key)
            return kept[0]

    def put(self, key: tuple[str, str], link: str) -> None:
        with self._lock:
            self._links[key] = (link, link_expiry(link, self.clock()))
            self._links.move_to_end(key)
            while len(self._links) > self.size:
                self._links.popitem(last=False)

    def drop(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._links.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._links.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._links)


LINKS = LinkCache()
