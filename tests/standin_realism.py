"""The stand-in hub's realism switches (:class:`HubRealism`, mixed into :class:`standin_hub.StandinHub`): the Hub
as it behaves on huggingface.co, not as a polite loopback server. All are off by default.

* :meth:`~HubRealism.quota`: fixed-window quotas per bucket, with ``RateLimit``/``RateLimit-Policy`` on every answer
  of the bucket and a 429 without ``Retry-After`` past the limit (hub-docs ``docs/hub/rate-limits.md``: "All quotas
  are calculated over 5-minute fixed windows"; "Resolvers" are "all the URLs that contain a /resolve/ segment";
  huggingface_hub#3553 shows ``RateLimit: "api";r=489;t=189`` on a 200). :meth:`~HubRealism.calls` counts every
  request per bucket, quota or not.
* :meth:`~HubRealism.latency`: a wait per request (each hop) on the Hub's origin and the CDN's.
* :meth:`~HubRealism.sign_links`: the LFS redirect points to a signed, expiring URL (``X-Amz-Expires``, as the
  ``cas-bridge.xethub.hf.co`` links datasets#7685 shows), which the CDN enforces as S3 does; with ``xet=True`` the
  redirect carries the Xet headers ``huggingface_hub`` (``utils/_xet.py``, ``parse_xet_file_data_from_response``)
  follows, and the Xet token route fails.
* :meth:`~HubRealism.cdn_gzip`: a CDN that ignores ``Range`` and gzips the whole body when the client accepts gzip,
  as CloudFront does (huggingface_hub PR #3778; ``file_download.py``: "CloudFront with Accept-Encoding: gzip").
* :meth:`~HubRealism.bogus_416`: 416 ``Content-Range: bytes */177``, ``x-cache: Error from cloudfront`` on valid
  ranges (datasets#7685).
* :meth:`~HubRealism.known_tokens`: 401 "Invalid credentials in Authorization header" for any other token, public
  repositories included (huggingface_hub ``utils/_http.py``, ``hf_raise_for_status`` special-cases the message).
* :meth:`~HubRealism.resolve_cache`: ``/resolve/`` of a small (non-LFS) file answers a relative 307 to
  ``/api/resolve-cache/...`` (hf-hub#141, hf-hub commit 194cfbd: a 307 with its own small body).
* :meth:`~HubRealism.stall`: every answer to some paths late (a listing that stalls).
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import math
import os
import re
import threading
import time
import zlib
from urllib.parse import parse_qs, quote, unquote

GZIP_CHUNK = 1 << 20  # bytes of the file compressed per chunk of a gzip answer
BUCKETS = ("resolvers", "api")
AMZ_DATE = "%Y%m%dT%H%M%SZ"
BOGUS_SIZE = 177  # the size a bogus 416 claims (datasets#7685)

RESOLVE_CACHE = re.compile(
    r"^/api/resolve-cache/(?P<kind>models|datasets)/(?P<repo>[^/]+(?:/[^/]+)?)/(?P<commit>[0-9a-f]{40})/(?P<file>.+)$"
)
XET_READ_TOKEN = re.compile(
    r"^/api/(?P<kind>models|datasets)/(?P<repo>[^/]+(?:/[^/]+)?)/xet-read-token/(?P<rev>[^/]+)$"
)


def bucket_of(path: str) -> str | None:
    """The rate-limit bucket of a request to the Hub's origin by its URL path (no query): ``"resolvers"`` for a path
    holding ``/resolve/`` or starting with ``/api/resolve-cache/``, ``"api"`` for another ``/api/`` path, else None."""
    if "/resolve/" in path or path.startswith("/api/resolve-cache/"):
        return "resolvers"
    return "api" if path.startswith("/api/") else None


class _Quota:
    """A fixed-window quota: ``limit`` requests per ``window_s`` per client, windows aligned to ``start``."""

    def __init__(self, bucket: str, limit: int, window_s: float, rounding: str):
        self.bucket, self.limit, self.window_s, self.rounding = bucket, int(limit), float(window_s), rounding
        self.start = time.monotonic()
        self.used: dict[str, tuple[int, int]] = {}  # client -> (window index, requests in it)

    def take(self, client: str) -> tuple[bool, dict[str, str]]:
        """Count one request of ``client``: whether it is within the quota, and the headers of its answer."""
        index, into = divmod(time.monotonic() - self.start, self.window_s)
        window, count = self.used.get(client, (index, 0))
        count = (count if window == index else 0) + 1
        self.used[client] = (index, count)
        left_s = self.window_s - into
        t = math.floor(left_s) if self.rounding == "floor" else math.ceil(left_s)
        headers = {
            "RateLimit": f'"{self.bucket}";r={max(0, self.limit - count)};t={t}',
            "RateLimit-Policy": f'"fixed window";"{self.bucket}";q={self.limit};w={int(self.window_s)}',
        }
        return count <= self.limit, headers


def _s3_error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'
    ).encode()


class HubRealism:
    """The switches of this module's docstring, as methods of the stand-in hub. The host class provides ``_lock``,
    ``faults``, ``url``, ``cdn_url``, ``_error``, ``_send``, ``_write``, ``_take``, ``_lookup``, ``_serve`` and
    ``_count_served``."""

    def _init_realism(self) -> None:
        self._calls: dict[str, int] = {}
        self._quotas: dict[str, _Quota] = {}
        self._latency: tuple[float, float] = (0.0, 0.0)  # (hub, cdn) seconds per request
        self._signing: tuple[int, bool] | None = None  # (ttl seconds, Xet headers)
        self._secret = os.urandom(32)
        self._gzip = False
        self._bogus: tuple[int, str] | None = None  # (every, path substring)
        self._bogus_count = 0
        self._tokens: frozenset[str] | None = None
        self._resolve_cache = False
        self._stalls: dict[str, float] = {}
        self._stopping = threading.Event()  # set by stop(): waits end early

    # -- switches --------------------------------------------------------------------------------------------------

    def quota(self, bucket: str, limit: int | None, window_s: float, *, rounding: str = "floor") -> None:
        """From now on allow ``limit`` requests of ``bucket`` per fixed window of ``window_s`` seconds, counted per
        token (the ``Authorization`` header), else per client address, as the Hub does (hub-docs
        ``docs/hub/rate-limits.md``).

        ``bucket``: ``"resolvers"`` (every request to the Hub's origin whose path holds ``/resolve/`` or starts with
        ``/api/resolve-cache/``) or ``"api"`` (its other ``/api/`` paths); the CDN is never counted. Windows start
        at this call. Every answer of the bucket carries ``RateLimit: "<bucket>";r=<left>;t=<seconds to the
        window's end>`` and ``RateLimit-Policy: "fixed window";"<bucket>";q=<limit>;w=<window_s as int>``; past the
        limit the answer is 429 with them, the Hub's error JSON and no ``Retry-After``. ``t`` is the seconds left
        rounded down (``rounding="floor"``, so it can be 0 before the window ends) or up (``"ceil"``).
        ``limit=None`` switches the bucket's quota off."""
        if bucket not in BUCKETS:
            raise ValueError(f"bucket {bucket!r}: one of {BUCKETS}")
        if rounding not in ("floor", "ceil"):
            raise ValueError(f"rounding {rounding!r}: 'floor' or 'ceil'")
        with self._lock:
            if limit is None:
                self._quotas.pop(bucket, None)
            else:
                self._quotas[bucket] = _Quota(bucket, limit, window_s, rounding)

    def calls(self, bucket: str) -> int:
        """Requests counted in ``bucket`` (``"resolvers"``, ``"api"``, or ``"cdn"``: every request to the CDN's
        origin) since the last ``reset_counters()``, whether a quota is on or not, refused ones included."""
        if bucket not in (*BUCKETS, "cdn"):
            raise ValueError(f"bucket {bucket!r}: one of {(*BUCKETS, 'cdn')}")
        with self._lock:
            return self._calls.get(bucket, 0)

    def latency(self, seconds: float, *, cdn: float | None = None) -> None:
        """From now on answer every request to the Hub's origin after ``seconds`` (each hop: a redirect and the
        request it leads to wait each), and every request to the CDN after ``cdn`` seconds (default: ``seconds``).
        0 switches it off."""
        with self._lock:
            self._latency = (float(seconds), float(seconds if cdn is None else cdn))

    def sign_links(self, ttl_s: int | None, *, xet: bool = False) -> None:
        """From now on the ``302`` of :meth:`redirect_large` points to a signed URL on the CDN, as the Hub's links to
        ``cas-bridge.xethub.hf.co`` (datasets#7685): query ``X-Amz-Algorithm=AWS4-HMAC-SHA256``, ``X-Amz-Date``
        (``YYYYMMDDTHHMMSSZ``, UTC, whole seconds), ``X-Amz-Expires=<ttl_s>``, ``X-Amz-Signature`` (an HMAC of the
        path, date and expiry with this hub's secret).

        The CDN then answers, as S3 does, 400 ``InvalidArgument`` ("Only one auth mechanism allowed") when the
        request also carries ``Authorization``; 403 ``AccessDenied`` without a signature, 403
        ``SignatureDoesNotMatch`` for a wrong one; 403 ``AccessDenied`` "Request has expired" once the whole second
        of the clock is past ``X-Amz-Date + ttl_s`` (S3 compares whole seconds: a link lives at least ``ttl_s``
        seconds after it was issued, less than ``ttl_s + 1``; ``ttl_s=0``: until the next whole second).
        With ``xet=True`` the 302 also carries ``X-Xet-Hash``, ``X-Xet-Refresh-Route`` and ``Link: <...>;
        rel="xet-auth"`` (both the URL of ``/api/{models,datasets}/<repo>/xet-read-token/<commit>`` on the Hub's
        origin), besides ``X-Linked-Size``/``X-Linked-Etag``, and that route answers 500: a client that downloads
        through Xet fails. ``ttl_s=None`` switches signing off (unsigned CDN URLs)."""
        with self._lock:
            self._signing = None if ttl_s is None else (int(ttl_s), bool(xet))

    def cdn_gzip(self, on: bool = True) -> None:
        """From now on the CDN and ``/api/resolve-cache/`` ignore ``Range`` when the request's ``Accept-Encoding``
        holds ``gzip``, and answer 200 with the whole file gzip-encoded (``Content-Encoding: gzip``, chunked, no
        ``Content-Length``), as CloudFront does for compressible objects (huggingface_hub PR #3778). A request with
        ``Accept-Encoding: identity`` (or without gzip) gets its range. The bytes counted served are the compressed
        bytes written."""
        with self._lock:
            self._gzip = bool(on)

    def bogus_416(self, every: int | None, path: str = "") -> None:
        """From now on answer every ``every``-th GET with a ``Range`` on either origin whose path holds ``path`` with
        416, ``Content-Range: bytes */177`` and ``x-cache: Error from cloudfront``, though the range is valid, as
        CloudFront did (datasets#7685). Counted from this call; ``None`` stops it."""
        with self._lock:
            self._bogus = None if every is None else (int(every), path)
            self._bogus_count = 0

    def bogus_416_once(self, path: str = "") -> None:
        """The next GET with a ``Range`` on either origin whose path holds ``path`` gets :meth:`bogus_416`'s answer,
        once. Calls queue up."""
        with self._lock:
            self._once.append(("bogus 416", path, "GET", None))

    def known_tokens(self, tokens) -> None:
        """From now on a request to the Hub's origin with ``Authorization: Bearer T``, ``T`` not in ``tokens``, gets
        401 with ``X-Error-Message: Invalid credentials in Authorization header`` and that ``{"error": ...}``, on
        every path, public repositories included, as the Hub answers a stale token (huggingface_hub
        ``utils/_http.py``: ``hf_raise_for_status`` special-cases this message). Requests without a token are
        unaffected; ``None`` accepts every token again."""
        with self._lock:
            self._tokens = None if tokens is None else frozenset(tokens)

    def resolve_cache(self, on: bool = True) -> None:
        """From now on ``/resolve/`` of a non-LFS file answers a relative ``307`` to
        ``/api/resolve-cache/{models,datasets}/<repo>/<commit>/<file>`` (a small body with its own
        ``Content-Length``, ``X-Repo-Commit``), as the Hub does (hf-hub#141; hf-hub commit 194cfbd); that route
        serves the file (Range, and gzip when :meth:`cdn_gzip` is on) and counts in the ``"resolvers"`` bucket."""
        with self._lock:
            self._resolve_cache = bool(on)

    def stall(self, path: str, seconds: float | None) -> None:
        """From now on answer every request on either origin whose path holds ``path`` only after ``seconds`` (a
        listing that stalls; a client without a timeout hangs); ``None`` stops it. :meth:`stop` ends the waits."""
        with self._lock:
            if seconds is None:
                self._stalls.pop(path, None)
            else:
                self._stalls[path] = float(seconds)

    # -- hooks the host calls --------------------------------------------------------------------------------------

    def _realism(self, h, method: str, path: str, cdn: bool) -> bool:
        """Count the request, wait as told, apply the quota, the token check and bogus 416s; True when one of them
        answered it. Sets ``h.extra_headers`` (sent with whatever answer follows)."""
        h.extra_headers = {}
        bucket = "cdn" if cdn else bucket_of(path)
        with self._lock:
            if bucket is not None:
                self._calls[bucket] = self._calls.get(bucket, 0) + 1
            wait = self._latency[1 if cdn else 0]
            stalls = [seconds for where, seconds in self._stalls.items() if where in h.path]
            if stalls:
                self.faults.append(("stalled", h.path))
        if wait + sum(stalls):
            self._stopping.wait(wait + sum(stalls))
        if not cdn and self._over_quota(h, method, bucket):
            return True
        if not cdn and self._unknown_token(h, method):
            return True
        return self._bogus_range(h, method)

    def _over_quota(self, h, method: str, bucket: str | None) -> bool:
        client = h.headers.get("Authorization") or h.client_address[0]
        with self._lock:
            quota = self._quotas.get(bucket)
            if quota is None:
                return False
            allowed, h.extra_headers = quota.take(client)
            if not allowed:
                self.faults.append(("rate limited", h.path))
        if allowed:
            return False
        self._error(h, method, 429, None, "You have exceeded our rate limit: retry later")
        return True

    def _unknown_token(self, h, method: str) -> bool:
        auth = h.headers.get("Authorization") or ""
        with self._lock:
            tokens = self._tokens
        if tokens is None or not auth.startswith("Bearer ") or auth[len("Bearer ") :] in tokens:
            return False
        self._error(h, method, 401, None, "Invalid credentials in Authorization header")
        return True

    def _bogus_range(self, h, method: str) -> bool:
        if method != "GET" or h.headers.get("Range") is None:
            return False
        with self._lock:
            bogus = self._bogus is not None and self._bogus[1] in h.path
            if bogus:
                self._bogus_count += 1
                bogus = self._bogus_count % self._bogus[0] == 0
                if bogus:
                    self.faults.append(("bogus 416", h.path))
        if not bogus and self._take("bogus 416", h.path, method) is None:
            return False
        body = _s3_error("InvalidRange", "The requested range is not satisfiable")
        headers = {"Content-Type": "application/xml", "Content-Range": f"bytes */{BOGUS_SIZE}"}
        self._send(h, method, 416, {**headers, "x-cache": "Error from cloudfront"}, body)
        return True

    def _realism_route(self, h, method: str, path: str) -> bool:
        """Answer ``/api/resolve-cache/...`` and, with Xet headers on, ``.../xet-read-token/...``; False for another
        path."""
        if m := RESOLVE_CACHE.match(path):
            kind = "dataset" if m["kind"] == "datasets" else "model"
            self._resolve_cached(h, method, unquote(m["repo"]), m["commit"], unquote(m["file"]), kind)
            return True
        with self._lock:
            xet = self._signing is not None and self._signing[1]
        if xet and XET_READ_TOKEN.match(path):
            self._error(h, method, 500, None, "Internal Error - We're working hard to fix this as soon as possible!")
            return True
        return False

    def _resolve_cached(self, h, method: str, repo_id: str, commit: str, filename: str, kind: str) -> None:
        found = self._lookup(h, method, repo_id, commit, files=True, kind=kind)
        if found is None:
            return
        entry = found[0].commits[found[1]].get(filename)
        if entry is None:
            self._error(h, method, 404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": found[1]})
            return
        headers = {"Accept-Ranges": "bytes", "ETag": f'"{entry.etag}"', "X-Repo-Commit": found[1]}
        if self._gzips(h):
            self._serve_gzip(h, method, repo_id, filename, entry, headers)
        else:
            self._serve(h, method, repo_id, filename, entry, headers)

    def _cached_redirect(self, h, method: str, repo_id: str, commit: str, filename: str, entry, kind: str) -> bool:
        """With :meth:`resolve_cache` on, answer ``/resolve/`` of a non-LFS file with the relative 307; else False."""
        with self._lock:
            on = self._resolve_cache
        if not on or entry.lfs:
            return False
        kinds = "datasets" if kind == "dataset" else "models"
        location = f"/api/resolve-cache/{kinds}/{quote(repo_id)}/{commit}/{quote(filename)}"
        headers = {"Location": location, "X-Repo-Commit": commit, "ETag": f'"{entry.etag}"'}
        body = f"Temporary Redirect. Redirecting to {location}".encode()
        self._send(h, method, 307, {"Content-Type": "text/plain; charset=utf-8", **headers}, body)
        return True

    def _cdn_link(self, path: str, repo_id: str, commit: str, entry, kind: str) -> tuple[str, dict[str, str]]:
        """The CDN URL of a redirect to ``path`` (signed when :meth:`sign_links` says so) and its Xet headers."""
        with self._lock:
            signing = self._signing
        if signing is None:
            return f"{self.cdn_url}{path}", {}
        ttl, xet = signing
        date = time.strftime(AMZ_DATE, time.gmtime())
        query = f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date={date}&X-Amz-Expires={ttl}"
        location = f"{self.cdn_url}{path}?{query}&X-Amz-Signature={self._signature(path, date, str(ttl))}"
        if not xet:
            return location, {}
        kinds = "datasets" if kind == "dataset" else "models"
        route = f"{self.url}/api/{kinds}/{quote(repo_id)}/xet-read-token/{commit}"
        xet_hash = hashlib.sha256(f"xet:{entry.sha256}".encode()).hexdigest()
        return location, {"X-Xet-Hash": xet_hash, "X-Xet-Refresh-Route": route, "Link": f'<{route}>; rel="xet-auth"'}

    def _signature(self, path: str, date: str, expires: str) -> str:
        return hmac.new(self._secret, f"{path}\n{date}\n{expires}".encode(), hashlib.sha256).hexdigest()

    def _link_refused(self, h, method: str, path: str, query: str) -> bool:
        """With :meth:`sign_links` on, refuse a CDN request as S3 refuses a presigned URL (400 or 403 with S3's XML
        error); False when it may be served."""
        with self._lock:
            signing = self._signing
        if signing is None:
            return False
        asked = {key: values[-1] for key, values in parse_qs(query).items()}
        if "Authorization" in h.headers:
            message = (
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string "
                "parameter or the Authorization header should be specified"
            )
            refusal = (400, "InvalidArgument", message)
        elif not all(k in asked for k in ("X-Amz-Date", "X-Amz-Expires", "X-Amz-Signature")):
            refusal = (403, "AccessDenied", "Access Denied")
        elif not hmac.compare_digest(
            asked["X-Amz-Signature"], self._signature(path, asked["X-Amz-Date"], asked["X-Amz-Expires"])
        ):
            message = "The request signature we calculated does not match the signature you provided."
            refusal = (403, "SignatureDoesNotMatch", message)
        else:
            issued = calendar.timegm(time.strptime(asked["X-Amz-Date"], AMZ_DATE))
            if int(time.time()) <= issued + int(asked["X-Amz-Expires"]):
                return False
            refusal = (403, "AccessDenied", "Request has expired")
        status, code, message = refusal
        self._send(h, method, status, {"Content-Type": "application/xml"}, _s3_error(code, message))
        return True

    def _gzips(self, h) -> bool:
        """Whether this answer is the whole file gzipped (:meth:`cdn_gzip` on and gzip accepted)."""
        with self._lock:
            on = self._gzip
        codings = [part.split(";")[0].strip().lower() for part in h.headers.get("Accept-Encoding", "").split(",")]
        return on and "gzip" in codings

    def _serve_gzip(self, h, method: str, repo_id: str, filename: str, entry, headers: dict) -> None:
        """The whole file, gzip-encoded and chunked, whatever ``Range`` asked (:meth:`cdn_gzip`)."""
        h.send_response(200)
        extra = {"Content-Encoding": "gzip", "Transfer-Encoding": "chunked", "Vary": "Accept-Encoding"}
        for key, value in {"Content-Type": "application/octet-stream", **headers, **extra}.items():
            h.send_header(key, value)
        h.end_headers()
        if method == "HEAD":
            return
        packer = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: the gzip container
        try:
            for pos in range(0, entry.size, GZIP_CHUNK):
                self._gzip_chunk(h, repo_id, filename, packer.compress(entry.read(pos, pos + GZIP_CHUNK)))
            self._gzip_chunk(h, repo_id, filename, packer.flush())
            self._write(h, b"0\r\n\r\n")
        except OSError:  # the client went away
            h.close_connection = True

    def _gzip_chunk(self, h, repo_id: str, filename: str, data: bytes) -> None:
        if data:
            self._count_served(repo_id, filename, len(data))
            self._write(h, f"{len(data):x}\r\n".encode() + data + b"\r\n")
