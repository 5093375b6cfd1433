"""What makes the stand-in hub (``tests/standin_hub.py``) behave as the real Hugging Face Hub does under load and in the
wild, each switch off by default. :class:`RealHub` is a base of :class:`standin_hub.StandinHub`; its hooks are called
by the stand-in's request handling.

* **Quotas** (:meth:`RealHub.quota`): fixed windows per bucket, as https://huggingface.co/docs/hub/rate-limits
  documents them: every hub-origin URL with a ``/resolve/`` segment (and ``/api/resolve-cache/``, where the Hub
  redirects small files) is a ``resolvers`` call, other ``/api/`` paths ``api`` calls; counted per token (the
  ``Authorization`` header) else per client address. Every answer of a bucket under a quota carries ``RateLimit:
  "<bucket>";r=<left>;t=<seconds to the window's end>`` and ``RateLimit-Policy: "fixed window";"<bucket>";q=<q>;
  w=<w>`` (the IETF draft the Hub follows; huggingface_hub#3553 shows both on a 200); past the quota the answer is
  429 with them and no ``Retry-After``. ``t`` is whole seconds, truncated by default: huggingface_hub waits ``t + 1``
  "to avoid rounding issues" (``utils/_http.py``, PR #3577). :meth:`RealHub.calls` counts each bucket's requests, and
  the CDN's, whether a quota is on or not.
* **Latency** (:meth:`RealHub.latency`): every request on each origin answered after a delay, each redirect hop too.
* **Signed CDN links** (:meth:`RealHub.sign_links`): the ``302`` of an LFS file points to a signed URL on the CDN's
  origin with ``X-Amz-Algorithm``, ``X-Amz-Date``, ``X-Amz-Expires`` and ``X-Amz-Signature``, as the Hub's links to
  ``cas-bridge.xethub.hf.co`` are (datasets#7685 shows one, ``X-Amz-Expires=3600``). The CDN answers 403 (S3's XML
  ``AccessDenied``, "Request has expired") past the expiry or for a missing or wrong signature, and 400
  (``InvalidArgument``, "Only one auth mechanism allowed") to a request that also sends ``Authorization``, as S3 does
  for a presigned URL. With ``xet=True`` the redirect carries the headers of a Xet-backed file (``X-Xet-Hash``,
  ``X-Xet-Refresh-Route``, ``Link: <...>; rel="xet-auth"``; huggingface_hub ``utils/_xet.py``), and the route a Xet
  client would call next, ``/api/models/<repo>/xet-read-token/<rev>``, answers 500.
* **A CDN that ignores Range under gzip** (:meth:`RealHub.cdn_gzip`): CloudFront answers a Range request with 200 and
  the whole object, compressed, when the request accepts gzip and the object is compressible (huggingface_hub PR
  #3778 sends ``Accept-Encoding: identity`` for this reason; ``file_download.py``). The body goes out gzip-encoded and
  chunked; the bytes counted are the bytes written.
* **Bogus 416s** (:meth:`RealHub.bogus_416`, :meth:`RealHub.bogus_416_once`): a valid single range answered 416 with
  ``Content-Range: bytes */177`` and ``x-cache: Error from cloudfront`` (datasets#7685).
* **Stale tokens** (:meth:`RealHub.known_tokens`): a token the Hub does not know gets 401 "Invalid credentials in
  Authorization header" on every path, public repositories included (huggingface_hub ``utils/_http.py``,
  ``hf_raise_for_status``).
* **Small files through the resolve cache** (:meth:`RealHub.resolve_cache`): ``/resolve/`` of a non-LFS file answers a
  relative 307 to ``/api/resolve-cache/models/<repo>/<commit>/<file>`` (hf-hub ``194cfbd``, hf-hub#141), which
  serves it and counts as a resolver call.
* **Stalls** (:meth:`RealHub.stall`): every request whose path holds a substring answered late, for good.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import threading
import time
import zlib
from urllib.parse import parse_qs, quote, urlsplit

BUCKETS = ("resolvers", "api")
_RESOLVE_CACHE = re.compile(
    r"^/api/resolve-cache/(?P<kind>models|datasets)/(?P<repo>[^/]+/[^/]+|[^/]+)/(?P<commit>[0-9a-f]{40})/(?P<file>.+)$"
)
_XET_TOKEN = re.compile(r"^/api/(models|datasets)/.+/xet-read-token/")
_AMZ_DATE = "%Y%m%dT%H%M%SZ"


def bucket_of(path: str) -> str | None:
    """The quota bucket of a hub-origin path, as the Hub documents them; None for one in neither."""
    route = urlsplit(path).path
    if "/resolve/" in route or route.startswith("/api/resolve-cache/"):
        return "resolvers"
    if route.startswith("/api/"):
        return "api"
    return None


class _Window:
    """One fixed window of one bucket's quota for one client."""

    def __init__(self):
        self.index, self.used = -1, 0


class RealHub:
    """The switches and their state (module docstring); mixed into :class:`standin_hub.StandinHub`."""

    def _init_realism(self) -> None:
        self._quotas: dict[str, tuple[int, float, str, float]] = {}  # bucket -> (limit, window, rounding, since)
        self._windows: dict[tuple[str, str], _Window] = {}  # (bucket, client) -> its current window
        self._calls: dict[str, int] = dict.fromkeys((*BUCKETS, "cdn"), 0)
        self._latency: tuple[float, float] = (0.0, 0.0)  # (hub, cdn) seconds
        self._signing: tuple[float, bool] | None = None  # (ttl, xet headers)
        self._secret = b"standin-cdn-secret"
        self._gzip = False
        self._bogus_every: tuple[int, str] | None = None
        self._bogus_count = 0
        self._bogus_once: list[str] = []
        self._tokens: set[str] | None = None
        self._resolve_cache = False
        self._stalls: dict[str, float] = {}
        self._realism_lock = threading.Lock()

    # -- switches --------------------------------------------------------------------------------------------------

    def quota(self, bucket: str, limit: int | None, window_s: float = 300.0, *, rounding: str = "floor") -> None:
        """A fixed-window quota of ``limit`` requests per ``window_s`` seconds on ``bucket`` (``resolvers`` or
        ``api``), the windows aligned to now; ``limit=None`` lifts it. ``rounding``: how ``t`` is made whole,
        ``floor`` (default) or ``ceil``."""
        if bucket not in BUCKETS or rounding not in ("floor", "ceil"):
            raise ValueError(f"bucket: one of {BUCKETS}; rounding: floor or ceil; got {bucket!r}, {rounding!r}")
        with self._realism_lock:
            if limit is None:
                self._quotas.pop(bucket, None)
            else:
                self._quotas[bucket] = (int(limit), float(window_s), rounding, time.monotonic())
            for key in [key for key in self._windows if key[0] == bucket]:
                del self._windows[key]

    def calls(self, bucket: str) -> int:
        """Requests counted in ``bucket`` (``resolvers``, ``api``, or ``cdn`` for the CDN's origin) since the last
        :meth:`reset_counters`, a quota on or not."""
        with self._realism_lock:
            return self._calls[bucket]

    def latency(self, seconds: float, *, cdn: float | None = None) -> None:
        """Every request answered after ``seconds`` on the hub's origin and ``cdn`` (default: the same) on the
        CDN's; 0 switches it off."""
        with self._realism_lock:
            self._latency = (float(seconds), float(seconds if cdn is None else cdn))

    def sign_links(self, ttl_s: float | None, *, xet: bool = False) -> None:
        """Redirects of LFS files to signed CDN links valid ``ttl_s`` seconds (module docstring); ``None`` for unsigned
        links again. ``xet``: the redirect also carries a Xet-backed file's headers."""
        with self._realism_lock:
            self._signing = None if ttl_s is None else (float(ttl_s), bool(xet))

    def cdn_gzip(self, on: bool = True) -> None:
        """The CDN (and the resolve cache) ignore ``Range`` for a request that accepts gzip (module docstring)."""
        with self._realism_lock:
            self._gzip = bool(on)

    def bogus_416(self, every: int | None, path: str = "") -> None:
        """Every ``every``-th GET with a Range, on either origin, whose path holds ``path`` answers a bogus 416."""
        with self._realism_lock:
            self._bogus_every, self._bogus_count = (None if every is None else (int(every), path)), 0

    def bogus_416_once(self, path: str = "") -> None:
        """The next GET with a Range whose path holds ``path`` answers a bogus 416, once (calls queue up)."""
        with self._realism_lock:
            self._bogus_once.append(path)

    def known_tokens(self, tokens) -> None:
        """Only these tokens are valid: another gets 401 "Invalid credentials in Authorization header" everywhere on
        the hub's origin; ``None`` accepts every token again."""
        with self._realism_lock:
            self._tokens = None if tokens is None else set(tokens)

    def resolve_cache(self, on: bool = True) -> None:
        """``/resolve/`` of a non-LFS file answers a relative 307 to ``/api/resolve-cache/...`` (module docstring)."""
        with self._realism_lock:
            self._resolve_cache = bool(on)

    def stall(self, path: str, seconds: float | None) -> None:
        """Every request whose path holds ``path`` answered only after ``seconds``; ``None`` stops it."""
        with self._realism_lock:
            if seconds is None:
                self._stalls.pop(path, None)
            else:
                self._stalls[path] = float(seconds)

    def _reset_realism_counters(self) -> None:
        with self._realism_lock:
            self._calls = dict.fromkeys((*BUCKETS, "cdn"), 0)

    # -- hooks -----------------------------------------------------------------------------------------------------

    def _realism_gate(self, h, method: str, cdn: bool) -> bool:
        """The switched-on behaviours before a request is routed; True when one of them answered it."""
        h.extra_headers = {}
        with self._realism_lock:
            delay = self._latency[1 if cdn else 0]
            stalls = [seconds for part, seconds in self._stalls.items() if part in h.path]
        for seconds in [delay, *stalls]:
            if seconds:
                time.sleep(seconds)
        if cdn:
            with self._realism_lock:
                self._calls["cdn"] += 1
            return self._check_signature(h, method) or self._bogus_answer(h, method)
        bucket = bucket_of(h.path)
        if bucket is not None:
            with self._realism_lock:
                self._calls[bucket] += 1
        if self._stale_token(h, method) or self._over_quota(h, method, bucket) or self._bogus_answer(h, method):
            return True
        route = urlsplit(h.path).path
        if _XET_TOKEN.match(route):
            self._error(h, method, 500, None, "Xet is not served by this hub")
            return True
        if m := _RESOLVE_CACHE.match(route):
            self._from_resolve_cache(h, method, m)
            return True
        return False

    def _stale_token(self, h, method: str) -> bool:
        auth = h.headers.get("Authorization")
        with self._realism_lock:
            tokens = self._tokens
        if tokens is None or auth is None or auth.removeprefix("Bearer ").strip() in tokens:
            return False
        self._error(h, method, 401, None, "Invalid credentials in Authorization header")
        return True

    def _over_quota(self, h, method: str, bucket: str | None) -> bool:
        """Count the request in its bucket's window; set the ``RateLimit`` headers; answer 429 past the quota."""
        with self._realism_lock:
            quota = self._quotas.get(bucket) if bucket else None
            if quota is None:
                return False
            limit, window_s, rounding, since = quota
            client = h.headers.get("Authorization") or h.client_address[0]
            elapsed = time.monotonic() - since
            index = int(elapsed // window_s)
            window = self._windows.setdefault((bucket, client), _Window())
            if window.index != index:
                window.index, window.used = index, 0
            window.used += 1
            left = (index + 1) * window_s - elapsed
            t = math.floor(left) if rounding == "floor" else math.ceil(left)
            over = window.used > limit
            remaining = max(0, limit - window.used)
        h.extra_headers = {
            "RateLimit": f'"{bucket}";r={remaining};t={t}',
            "RateLimit-Policy": f'"fixed window";"{bucket}";q={limit};w={int(window_s)}',
        }
        if over:
            with self._lock:
                self.faults.append(("rate limited", h.path))
            self._error(h, method, 429, None, "You have exceeded our rate limit: retry later")
        return over

    def _bogus_answer(self, h, method: str) -> bool:
        if method != "GET" or not h.headers.get("Range"):
            return False
        with self._realism_lock:
            hit = next((i for i, part in enumerate(self._bogus_once) if part in h.path), None)
            if hit is not None:
                del self._bogus_once[hit]
            elif self._bogus_every is not None and self._bogus_every[1] in h.path:
                self._bogus_count += 1
                hit = -1 if self._bogus_count % self._bogus_every[0] == 0 else None
        if hit is None:
            return False
        headers = {"Content-Range": "bytes */177", "x-cache": "Error from cloudfront", "Content-Type": "text/html"}
        self._send(h, method, 416, headers, b"<html><body>416 Requested Range Not Satisfiable</body></html>")
        return True

    def _signed_location(self, location: str) -> str:
        """``location`` signed for the switched-on time to live (module docstring)."""
        with self._realism_lock:
            signing = self._signing
        if signing is None:
            return location
        date = time.strftime(_AMZ_DATE, time.gmtime())
        expires = max(1, math.ceil(signing[0]))
        path = urlsplit(location).path
        signature = hmac.new(self._secret, f"{path}\n{date}\n{expires}".encode(), hashlib.sha256).hexdigest()
        query = f"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date={date}&X-Amz-Expires={expires}"
        return f"{location}?{query}&X-Amz-Signature={signature}"

    def _xet_headers(self, repo_id: str, commit: str, entry) -> dict[str, str]:
        with self._realism_lock:
            xet = self._signing is not None and self._signing[1]
        if not xet:
            return {}
        refresh = f"/api/models/{quote(repo_id)}/xet-read-token/{commit}"
        return {
            "X-Xet-Hash": entry.sha256,
            "X-Xet-Refresh-Route": refresh,
            "Link": f'<{self.url}{refresh}>; rel="xet-auth"',
        }

    def _check_signature(self, h, method: str) -> bool:
        """A CDN request of a signed link: refused as S3 refuses a presigned URL that is expired, wrong, or sent
        with another credential."""
        with self._realism_lock:
            signing = self._signing
        if signing is None:
            return False
        parts = urlsplit(h.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        if "Authorization" in h.headers:
            self._s3_error(h, method, 400, "InvalidArgument", "Only one auth mechanism allowed")
            return True
        date, expires = query.get("X-Amz-Date", ""), query.get("X-Amz-Expires", "")
        wanted = hmac.new(self._secret, f"{parts.path}\n{date}\n{expires}".encode(), hashlib.sha256).hexdigest()
        if not expires.isdigit() or not hmac.compare_digest(wanted, query.get("X-Amz-Signature", "")):
            self._s3_error(h, method, 403, "SignatureDoesNotMatch", "The signature does not match")
            return True
        signed = time.mktime(time.strptime(date, _AMZ_DATE)) - time.timezone if date else 0.0
        if time.time() > signed + int(expires):
            self._s3_error(h, method, 403, "AccessDenied", "Request has expired")
            return True
        return False

    def _s3_error(self, h, method: str, status: int, code: str, message: str) -> None:
        body = f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'
        self._send(h, method, status, {"Content-Type": "application/xml"}, body.encode())

    def _cache_redirect(self, repo_id: str, commit: str, filename: str, kind: str) -> str | None:
        """The relative ``Location`` of a non-LFS file's 307 to the resolve cache, or None when that is off."""
        with self._realism_lock:
            on = self._resolve_cache
        if not on:
            return None
        where = "datasets" if kind == "dataset" else "models"
        return f"/api/resolve-cache/{where}/{quote(repo_id)}/{commit}/{quote(filename)}"

    def _from_resolve_cache(self, h, method: str, m: re.Match) -> None:
        from urllib.parse import unquote

        store = self._datasets if m["kind"] == "datasets" else self._repos
        with self._lock:
            repo = store.get(unquote(m["repo"]))
            entry = repo.commits.get(m["commit"], {}).get(unquote(m["file"])) if repo is not None else None
        if entry is None:
            self._error(h, method, 404, "EntryNotFound", "Entry not found")
            return
        self._serve(h, method, unquote(m["repo"]), unquote(m["file"]), entry, {"Accept-Ranges": "bytes"})

    def _gzip_whole(self, h, cdn: bool) -> bool:
        """Whether this answer ignores its Range and goes out gzip-encoded (:meth:`cdn_gzip`)."""
        with self._realism_lock:
            on = self._gzip
        if not on or not (cdn or urlsplit(h.path).path.startswith("/api/resolve-cache/")):
            return False
        accepted = [part.split(";")[0].strip().lower() for part in h.headers.get("Accept-Encoding", "").split(",")]
        return "gzip" in accepted

    def _send_gzipped(self, h, method: str, repo_id: str, filename: str, entry, headers: dict) -> None:
        """The whole of ``entry``, 200, gzip-encoded and chunked; the bytes counted are those written."""
        h.send_response(200)
        for key, value in {**headers, "Content-Encoding": "gzip", "Transfer-Encoding": "chunked"}.items():
            h.send_header(key, value)
        h.end_headers()
        if method == "HEAD":
            return
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip member
        pos, chunk_size = 0, 1 << 20
        try:
            while True:
                data = entry.read(pos, min(entry.size, pos + chunk_size)) if pos < entry.size else b""
                pos += len(data)
                packed = packer.compress(data) if data else packer.flush()
                if packed:
                    with self._lock:
                        self.bytes_served += len(packed)
                        self._served[repo_id] = self._served.get(repo_id, 0) + len(packed)
                        key = (repo_id, filename)
                        self._served_files[key] = self._served_files.get(key, 0) + len(packed)
                    self._write(h, b"%x\r\n" % len(packed) + packed + b"\r\n")
                if not data:
                    break
            self._write(h, b"0\r\n\r\n")
        except OSError:
            h.close_connection = True
