"""A stand-in Hugging Face Hub for offline tests: a threaded HTTP server on 127.0.0.1 serving in-memory repositories.

It speaks the part of the Hub protocol that ``huggingface_hub`` 2.4 uses to resolve a model or a dataset and read
its files:

* ``GET /api/models/{repo_id}`` and ``GET /api/models/{repo_id}/revision/{revision}`` (revision URL-quoted with
  ``safe=""``, so ``refs/pr/1`` arrives as ``refs%2Fpr%2F1``): the JSON that :class:`huggingface_hub.ModelInfo`
  parses (``id``, ``modelId``, ``sha``, ``siblings``, ``private``, ``gated``, ...). The query string is ignored except
  ``blobs=true`` (``files_metadata=True``), which adds ``size``, ``blobId`` and ``lfs`` to each sibling.
* ``GET /api/models/{repo_id}/refs``: the repository's branches and tags (``add_repo(..., revision=R)`` makes a
  branch ``R``; ``tag=True`` makes it a tag), as :meth:`huggingface_hub.HfApi.list_repo_refs` parses them
  (``branches``, ``tags``, ``converts``, ``pullRequests``, each ``{"name", "ref", "targetCommit"}``).
* ``HEAD`` and ``GET /{repo_id}/resolve/{revision}/{filename}``: ``200`` with the whole file, or ``206`` for a
  single ``Range: bytes=A-B`` / ``bytes=A-`` / ``bytes=-N`` (clipped to the file; ``416`` with
  ``Content-Range: bytes */SIZE`` when it starts past the end; a multi-range request also gets ``416``, the stand-in
  does not do ``multipart/byteranges``; a malformed Range header is ignored, as HTTP says). Headers: ``X-Repo-Commit``,
  ``ETag`` (quoted; the git blob sha1 for small text files, the sha256 of the content for "LFS" files, i.e. weights
  suffixes or >= 10 MiB; for a :class:`SparseFile` a sha256 fingerprint of its size and segments, which is stable but
  is not the content hash), ``Content-Length``, ``Accept-Ranges: bytes``, ``Content-Type``, and ``Content-Range`` on
  206/416. By default files are served directly (no redirect, so no ``X-Linked-Etag``); there are no Xet headers
  (``X-Xet-Hash`` ...) unless :meth:`StandinHub.sign_links` asks for them, so ``hf_hub_download`` takes the plain
  HTTP path even with ``hf_xet`` installed.
* Dataset repositories (:meth:`StandinHub.add_dataset`), as ``datasets`` and ``HfApi`` read them:
  ``GET /api/datasets/{repo_id}[/revision/{revision}]`` (the JSON :class:`huggingface_hub.DatasetInfo` parses),
  ``GET /api/datasets/{repo_id}/refs``, ``GET /api/datasets/{repo_id}/tree/{revision}[/{path}]`` (query
  ``recursive``; ``RepoFile`` entries with ``oid``, ``size`` and ``lfs``, ``RepoFolder`` entries; at most
  ``tree_page_size`` per page, the next one named by a ``Link: <...>; rel="next"`` header, as the Hub paginates;
  ``EntryNotFound`` for a path that holds nothing; ``expand`` is accepted, and adds nothing), and
  ``HEAD``/``GET /datasets/{repo_id}/resolve/{revision}/{file}`` with everything the model route does below (Range,
  redirects to ``/cdn/datasets/...``, faults, gating).
* ``POST /api/{models,datasets}/{repo_id}/paths-info/{revision}`` (form or JSON body ``paths``, as
  :meth:`huggingface_hub.HfApi.get_paths_info` sends it): the tree entry of each path that exists, in the order
  asked, a folder as a ``RepoFolder``; paths that hold nothing are left out.
* A CDN on another origin (a second server, ``cdn_url``: another port of 127.0.0.1): after
  :meth:`StandinHub.redirect_large` the ``/resolve/`` HEAD and GET of LFS files of at least ``min_size`` bytes
  answer ``302`` with ``Location: {cdn_url}/cdn/{repo_id}/{commit}/{filename}`` and the headers the Hub sends for
  LFS files (``X-Linked-Size``, ``X-Linked-Etag`` = the sha256, ``X-Repo-Commit``, ``ETag`` = the pointer's git
  blob id), from which ``hf_hub_download`` takes the file's metadata without following the redirect; it then GETs
  the CDN URL without ``Authorization``. The CDN serves the bytes as ``/resolve/`` does (Range, 206/416, ``ETag``)
  without asking for a token, and records each request. :meth:`StandinHub.redirect_repo` answers a renamed
  repository's requests with ``307`` and a relative ``Location`` on the Hub's own origin, as the Hub does.
* Faults, as the real Hub's, off by default (:meth:`StandinHub.rate_limit`, :meth:`~StandinHub.fail_once`,
  :meth:`~StandinHub.break_once`, :meth:`~StandinHub.stall_once`): 429 with ``Retry-After`` and/or ``RateLimit``
  headers every k-th request to the Hub's origin, a 5xx once, a body cut short once, an answer late once, every
  answer late, or every answer to some paths (:meth:`~StandinHub.slow_down`).
* The real Hub's own behaviour, which a loopback server is too polite to show, off by default
  (``tests/standin_realism.py``, where each is described with its source):

  - :meth:`StandinHub.quota`: fixed-window quotas per bucket (``"resolvers"``: every path holding ``/resolve/`` or
    starting with ``/api/resolve-cache/``; ``"api"``: the other ``/api/`` paths), counted per token else per client
    address, with ``RateLimit: "<bucket>";r=<left>;t=<seconds left, rounded down>`` and ``RateLimit-Policy: "fixed
    window";"<bucket>";q=<limit>;w=<window>`` on every answer of the bucket and 429 without ``Retry-After`` past the
    limit, as hub-docs ``docs/hub/rate-limits.md`` documents (huggingface_hub#3553 shows the headers on a 200);
    :meth:`~StandinHub.calls` counts the requests per bucket (and the CDN's) whether a quota is on or not;
  - :meth:`~StandinHub.latency`: a wait per request on each origin (each hop of a redirect waits);
  - :meth:`~StandinHub.sign_links`: the LFS redirect to a signed CDN URL (``X-Amz-Date``, ``X-Amz-Expires``,
    ``X-Amz-Signature``, as the ``cas-bridge.xethub.hf.co`` links of datasets#7685) that the CDN enforces as S3
    does (403 once expired or without a valid signature, 400 when ``Authorization`` comes too), optionally with the
    Xet headers ``huggingface_hub`` follows (``X-Xet-Hash``, ``X-Xet-Refresh-Route``, ``Link: <...>;
    rel="xet-auth"``) and a Xet token route that fails;
  - :meth:`~StandinHub.cdn_gzip`: the CDN (and ``/api/resolve-cache/``) ignores ``Range`` and sends the whole file
    gzipped and chunked when the request accepts gzip, as CloudFront does (huggingface_hub PR #3778);
  - :meth:`~StandinHub.bogus_416`, :meth:`~StandinHub.bogus_416_once`: 416 ``Content-Range: bytes */177``,
    ``x-cache: Error from cloudfront`` on valid ranges (datasets#7685);
  - :meth:`~StandinHub.known_tokens`: 401 "Invalid credentials in Authorization header" for any other token, on
    public repositories too (huggingface_hub ``utils/_http.py``, ``hf_raise_for_status``);
  - :meth:`~StandinHub.resolve_cache`: ``/resolve/`` of a non-LFS file answers a relative 307 to
    ``/api/resolve-cache/{models,datasets}/<repo>/<commit>/<file>``, which serves it (hf-hub#141);
  - :meth:`~StandinHub.stall`: every answer to some paths late (a listing that stalls);
  - ``add_repo(..., message=...)``: branches of byte-identical files as distinct commits, as a series' branches are
    (EleutherAI/pythia#205); ``add_repo`` on an existing branch moves it to a new commit, a re-upload
    (EleutherAI/pythia#107), the old commit staying reachable by its sha.

* Misbehaviour, off by default, of the kind a hub's mirror or a proxy in front of it (``HF_ENDPOINT``) could show,
  compromised, misconfigured or just slow; the answers keep the Hub's shapes, only the values lie
  (:meth:`StandinHub.misreport`, :meth:`~StandinHub.trickle`, :meth:`~StandinHub.ignore_ranges`):

  - a model or dataset info whose ``sha`` is not a commit id (``../../x``, an absolute path), told consistently (the
    refs, the ``X-Repo-Commit`` of ``/resolve/`` answers, and the files served under it as a revision), and
    ``/resolve/`` answers whose ``ETag`` (the name ``hf_hub_download`` gives the file in its cache) is one;
  - a dataset's tree listing whose ``Link: <...>; rel="next"`` names the next page on another origin (where the
    token would go), or names a next page after every page, the last too: a chain without end
    (:meth:`StandinHub.mislink_tree`);
  - a slow link: every byte of an answer's body (and, if asked, of its status line and headers) one at a time, a
    pause between them, as a congested or throttling proxy sends them;
  - a server that ignores ``Range`` and answers ``200`` with the whole file, which HTTP allows (RFC 9110, section
    14.2: "A server MAY ignore the Range header field"), a multi-gigabyte file included.

  A ref name with a newline (``add_repo(..., revision="step1\nx")``) and files that lie about their contents (an
  index whose ``weight_map`` leaves the repository, a safetensors header whose offsets overlap) need no switch: they
  are served as added.
* Errors, as the Hub sends them (``X-Error-Code`` + ``X-Error-Message`` headers and a JSON ``{"error": ...}`` body),
  which ``huggingface_hub.utils.hf_raise_for_status`` turns into typed errors:

  - unknown repository: ``X-Error-Code: RepoNotFound``, status 401 without an ``Authorization`` header and 404 with
    one (as the real Hub does) -> ``RepositoryNotFoundError``;
  - unknown revision: 404 ``RevisionNotFound`` -> ``RevisionNotFoundError``;
  - unknown file: 404 ``EntryNotFound`` (with ``X-Repo-Commit``) -> ``RemoteEntryNotFoundError`` (2.x name; it
    subclasses the old ``EntryNotFoundError``);
  - gated repository (``add_repo(..., gated_token=T)``): the file endpoints (``/resolve/``) answer 401 (no
    ``Authorization``) or 403 (another token) with ``GatedRepo`` -> ``GatedRepoError`` unless the request carries
    ``Authorization: Bearer T``. As on the real Hub, ``model_info`` of a gated repository is public: it succeeds
    without a token and reports ``gated="manual"``. Note ``GatedRepoError`` is a subclass of
    ``RepositoryNotFoundError``: test for it first.

  Any other path gets a plain 404 (``HfHubHTTPError``); ``list_repo_tree`` of a model and ``snapshot_download`` are
  not supported.

The endpoint: ``huggingface_hub`` reads ``HF_ENDPOINT`` once, at import time, into
``huggingface_hub.constants.ENDPOINT`` (and ``HF_HUB_OFFLINE`` into ``constants.HF_HUB_OFFLINE``, which
``huggingface_hub.is_offline_mode()`` returns), so setting the variables later has no effect on it. Tests
pass ``endpoint=hub.url`` explicitly (``HfApi(endpoint=...)``, ``hf_hub_download(endpoint=...)``,
``hf_hub_url(endpoint=...)``); the project's code should pick the endpoint up at call time with
``os.environ.get("HF_ENDPOINT") or huggingface_hub.constants.ENDPOINT`` so that a test can ``monkeypatch.setenv`` it.

The files it serves, bytes or :class:`~standin_files.SparseFile`, and what it reports about them (LFS or not, ETag,
git blob id) are in ``tests/standin_files.py``; ``SparseFile`` and ``sparse_safetensors`` are importable from here too.

Usage::

    with StandinHub() as hub:
        commit = hub.add_repo("org/tiny", {"config.json": b"{}", "model.safetensors": data})
        HfApi(endpoint=hub.url).model_info("org/tiny").sha == commit
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from standin_files import HubFile, SparseFile, sparse_safetensors
from standin_realism import RESOLVE_CACHE, HubRealism

__all__ = ["SparseFile", "StandinHub", "sparse_safetensors"]

CHUNK = 1 << 20  # bytes per socket write of a file body
LAST_MODIFIED = "2024-01-01T00:00:00.000Z"

_REFS = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)/refs/?$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<rev>[^/]+))?/?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_CDN = re.compile(r"^/cdn/(?P<repo>[^/]+(?:/[^/]+)?)/(?P<commit>[0-9a-f]{40})/(?P<file>.+)$")
_DATASET_CDN = re.compile(r"^/cdn/datasets/(?P<repo>[^/]+/[^/]+)/(?P<commit>[0-9a-f]{40})/(?P<file>.+)$")
_DATASET_REFS = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/refs/?$")
_DATASET_TREE = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.+))?$")
_DATASET_API = re.compile(r"^/api/datasets/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?/?$")
_DATASET_RESOLVE = re.compile(r"^/datasets/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_PATHS_INFO = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<repo>[^/]+(?:/[^/]+)?)/paths-info/(?P<rev>[^/]+)$")
_ROUTES = (RESOLVE_CACHE, _DATASET_CDN, _CDN, _DATASET_REFS, _DATASET_TREE, _DATASET_API, _DATASET_RESOLVE, _PATHS_INFO)
_ROUTES += (_REFS, _API, _RESOLVE)  # the dataset routes first: a model route would misread some of their paths
DATASET = "dataset"
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class _Repo:
    def __init__(self):
        self.refs: dict[str, str] = {}  # branch/tag -> commit
        self.tags: set[str] = set()  # the refs that are tags, not branches
        self.commits: dict[str, dict[str, HubFile]] = {}
        self.gated_token: str | None = None

    def default(self) -> str:
        return "main" if "main" in self.refs else next(iter(self.refs))

    def commit(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: StandinHub, role: str):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hub, self.role = hub, role  # role: "hub" or "cdn"
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def process_request(self, request, client_address):
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self):
        """Cut the kept-alive connections too, so that a stopped hub answers nothing."""
        with self.connections_lock:
            connections = list(self.connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):
        pass  # a client that hangs up mid-body is expected (truncate, cancelled reads)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub; every response carries a Content-Length
    disable_nagle_algorithm = True  # a redirect's headers and body go out in two writes: do not wait between them
    timeout = 30  # idle kept-alive connections are dropped after this many seconds
    server: _Server

    def do_GET(self):
        self.server.hub._handle(self, "GET")

    def do_HEAD(self):
        self.server.hub._handle(self, "HEAD")

    def do_POST(self):
        self.body = self.rfile.read(int(self.headers.get("Content-Length") or 0))  # read whatever the answer
        self.server.hub._handle(self, "POST")

    def send_response(self, code, message=None):
        self.server.hub._sent(self.server.role, code)
        super().send_response(code, message)
        for key, value in getattr(self, "extra_headers", {}).items():  # RateLimit headers of a quota
            self.send_header(key, value)

    def flush_headers(self):
        if hasattr(self, "_headers_buffer"):
            data, self._headers_buffer = b"".join(self._headers_buffer), []
            self.server.hub._write(self, data, headers=True)

    def log_message(self, format, *args):
        pass


class StandinHub(HubRealism):
    """A local Hugging Face Hub: repositories of in-memory files served on ``http://127.0.0.1:PORT`` (``url``), and
    its CDN on another port (``cdn_url``).

    Use as a context manager (``with StandinHub() as hub:``) or with :meth:`start`/:meth:`stop`. Repositories may be
    added before or while it runs. Counters, all thread-safe:

    * ``bytes_served``: body bytes of files handed to the connection (``/resolve/`` and CDN GETs), all repositories;
      :meth:`bytes_served_for` per repo or file, :meth:`requests_for` the requests that name a repository or a file
      of it; :meth:`reset_counters` zeroes them all;
    * ``requests``: ``(method, path, Range header or None)`` per request to the Hub's origin, ``path`` as sent
      (URL-quoted, with the query); ``statuses``: the status of each response it sent, in the order sent;
    * ``cdn_requests``: ``(method, path, Range header or None, whether an Authorization header came)`` per request to
      the CDN's origin (``cdn_url``);
    * ``faults``: ``(fault, path)`` per fault injected: ``"rate limited"``, ``"failed"``, ``"broken"``, ``"stalled"``,
      ``"bogus 416"``;
    * :meth:`calls`: requests per rate-limit bucket (``"resolvers"``, ``"api"``) and to the CDN (``"cdn"``).
    """

    def __init__(self):
        self.url = self.cdn_url = ""
        self.bytes_served = 0
        self.requests: list[tuple[str, str, str | None]] = []
        self.statuses: list[int] = []
        self.cdn_requests: list[tuple[str, str, str | None, bool]] = []
        self.faults: list[tuple[str, str]] = []
        self._served: dict[str, int] = {}
        self._served_files: dict[tuple[str, str], int] = {}
        self._repos: dict[str, _Repo] = {}
        self._datasets: dict[str, _Repo] = {}
        self.tree_page_size = 1000  # entries per page of a tree listing, as the Hub (then a Link to the next page)
        self._truncated: dict[tuple[str, str], int] = {}
        self._renamed: dict[str, str] = {}
        self._redirect_min: int | None = None
        self._rate: tuple[int, int | str | None, int | None, str] | None = None  # (every, Retry-After, reset, path)
        self._rate_count = 0
        self._once: list[tuple[str, str, str | None, object]] = []  # (fault, path substring, method or None, value)
        self._delay: tuple[float, str] = (0.0, "")  # (seconds, path substring)
        self._claims: dict[str, dict[str, str]] = {}  # repo -> {"sha": ..., "etag": ...} reported instead
        self._trickle: tuple[float, str, bool] | None = None  # (seconds per byte, path substring, headers too)
        self._whole_answers: str | None = None  # path substring of requests whose Range is ignored
        self._tree_links: tuple[str | None, bool] = (None, False)  # (origin of the next page, a next page after each)
        self._lock = threading.Lock()
        self._servers: list[_Server] = []
        self._threads: list[threading.Thread] = []
        self._init_realism()

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> StandinHub:
        """Start serving the Hub and its CDN on two free ports of 127.0.0.1 (new ones if it was stopped before); sets
        ``url`` and ``cdn_url``."""
        if not self._servers:
            self._stopping.clear()
            self._servers = [_Server(self, "hub"), _Server(self, "cdn")]
            self.url, self.cdn_url = (f"http://127.0.0.1:{server.server_address[1]}" for server in self._servers)
            self._threads = [
                threading.Thread(
                    target=server.serve_forever,
                    kwargs={"poll_interval": 0.05},
                    name=f"standin-{server.role}",
                    daemon=True,
                )
                for server in self._servers
            ]
            for thread in self._threads:
                thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and cut open connections; later requests to ``url`` or ``cdn_url`` are refused."""
        servers, self._servers = self._servers, []
        self._stopping.set()
        for server in servers:
            server.shutdown()
            server.close_connections()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> StandinHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- content ---------------------------------------------------------------------------------------------------

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | SparseFile],
        *,
        revision: str = "main",
        gated_token: str | None = None,
        tag: bool = False,
        message: str | None = None,
    ) -> str:
        """Add (or move) branch ``revision`` of ``repo_id`` to a commit holding ``files``; returns the commit sha.

        The commit is the sha1 of the repo id and the files' names and ETags, so the same content gives the same
        commit; older commits stay reachable by their sha. ``gated_token`` gates the whole repository (all
        revisions): file downloads then need ``Authorization: Bearer <gated_token>``. ``tag=True`` makes ``revision``
        a tag (as Ettin's ``step*`` checkpoints are) instead of a branch (as Pythia's are). ``message`` (a commit
        message) is mixed into the commit id, so two branches of byte-identical files are distinct commits, as a
        series' branches are on the Hub (EleutherAI/pythia#205: branches of pythia-2.8b whose weights are identical).
        Adding files to an existing ``revision`` moves it to the new commit (a re-upload, EleutherAI/pythia#107): the
        refs and the info report the new one, the old one stays reachable by its sha.
        """
        kw = {"revision": revision, "gated_token": gated_token, "tag": tag, "message": message}
        return self._add(self._repos, repo_id, files, **kw)

    def add_dataset(
        self,
        repo_id: str,
        files: dict[str, bytes | SparseFile],
        *,
        revision: str = "main",
        gated_token: str | None = None,
        tag: bool = False,
        message: str | None = None,
    ) -> str:
        """:meth:`add_repo` for a dataset repository (``/api/datasets/...``, ``/datasets/.../resolve/...``): the
        same commits, branches, tags, gating, Range reads, redirects and faults."""
        kw = {"revision": revision, "gated_token": gated_token, "tag": tag, "message": message}
        return self._add(self._datasets, repo_id, files, **kw)

    def _add(self, store: dict, repo_id: str, files: dict, *, revision: str, gated_token, tag: bool, message) -> str:
        entries = {name: HubFile(name, content) for name, content in files.items()}
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(entries):
            digest.update(f"\0{name}\0{entries[name].etag}".encode())
        if message is not None:
            digest.update(f"\0\0message\0{message}".encode())
        commit = digest.hexdigest()
        with self._lock:
            repo = store.setdefault(repo_id, _Repo())
            repo.commits[commit] = entries
            repo.refs[revision] = commit
            if tag:
                repo.tags.add(revision)
            else:
                repo.tags.discard(revision)
            if gated_token is not None:
                repo.gated_token = gated_token
        return commit

    def add_folder(self, repo_id: str, folder: str | Path, **kw) -> str:
        """:meth:`add_repo` with every file under ``folder`` (recursively; names relative, with ``/``; paths with a
        part starting with ``.`` are skipped). ``kw`` as for :meth:`add_repo`."""
        root = Path(folder)
        files = {
            path.relative_to(root).as_posix(): path.read_bytes()
            for path in sorted(root.rglob("*"))
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(root).parts)
        }
        return self.add_repo(repo_id, files, **kw)

    def truncate(self, repo_id: str, filename: str, keep: int | None) -> None:
        """From now on send at most ``keep`` body bytes per GET of ``filename`` (any revision of ``repo_id``), while
        announcing the full ``Content-Length``/``Content-Range``, then close the connection: a transfer cut short.
        ``keep=None`` undoes it."""
        with self._lock:
            if repo_id not in self._repos and repo_id not in self._datasets:
                raise KeyError(repo_id)
            if keep is None:
                self._truncated.pop((repo_id, filename), None)
            else:
                self._truncated[(repo_id, filename)] = int(keep)

    # -- redirects and faults --------------------------------------------------------------------------------------

    def redirect_repo(self, old_id: str, new_id: str | None) -> None:
        """From now on answer every Hub request under ``old_id`` (API and ``/resolve/``) with ``307`` and a relative
        ``Location``, the same path under ``new_id``: a renamed repository. ``new_id=None`` undoes it."""
        with self._lock:
            if new_id is None:
                self._renamed.pop(old_id, None)
            else:
                self._renamed[old_id] = new_id

    def redirect_large(self, min_size: int | None = 0) -> None:
        """From now on answer ``/resolve/`` HEAD and GET of LFS files of at least ``min_size`` bytes with ``302`` to
        the CDN (module docstring), as the Hub does for LFS files; ``None`` serves them directly again."""
        with self._lock:
            self._redirect_min = min_size

    def rate_limit(
        self, every: int | None, retry_after: int | str | None = None, *, reset: int | None = None, path: str = ""
    ) -> None:
        """From now on answer every ``every``-th request to the Hub's origin with 429 and the Hub's error headers.

        Requests are counted from this call over all paths of the Hub's origin, API and ``/resolve/`` alike, or only
        those holding ``path`` when given; the CDN is never limited. ``retry_after`` (seconds, or an HTTP date as a
        string) is sent as ``Retry-After``; ``reset`` as the IETF ``RateLimit: "api";r=0;t=RESET`` header (with a
        ``RateLimit-Policy``); neither is sent when None. ``every=None`` stops it; ``every=1`` refuses everything.
        (``hf_hub_download`` retries a 429 of its GET itself, sleeping ``Retry-After`` + 1 s for real: a test that
        should not wait limits only the paths it reads by Range.)"""
        with self._lock:
            self._rate = None if every is None else (int(every), retry_after, reset, path)
            self._rate_count = 0

    def fail_once(self, path_substring: str, status: int = 503, *, method: str | None = None) -> None:
        """The next request on either origin whose path holds ``path_substring`` (and whose method is ``method``,
        when given) answers ``status`` with the Hub's error headers, once. Calls queue up."""
        with self._lock:
            self._once.append(("failed", path_substring, method, int(status)))

    def break_once(self, path_substring: str, keep: int | None = None) -> None:
        """The next GET on either origin whose path holds ``path_substring`` and whose answer has a body announces
        the whole ``Content-Length`` but sends only ``keep`` bytes of it (half when None), then closes the
        connection, once. :meth:`truncate` does the same for good."""
        with self._lock:
            self._once.append(("broken", path_substring, "GET", keep))

    def stall_once(self, path_substring: str, seconds: float) -> None:
        """The next request on either origin whose path holds ``path_substring`` is answered only after ``seconds``
        (a client with a shorter timeout gives up first), once."""
        with self._lock:
            self._once.append(("stalled", path_substring, None, float(seconds)))

    def slow_down(self, seconds: float, path: str = "") -> None:
        """From now on answer every request on either origin (only those whose path holds ``path``, when given) after
        ``seconds`` (0: at once again): a slow link, which leaves a test the time to interrupt a client mid-transfer."""
        with self._lock:
            self._delay = (float(seconds), path)

    def misreport(self, repo_id: str, *, sha: str | None = None, etag: str | None = None) -> None:
        """From now on report ``sha`` as the commit of every revision of ``repo_id`` (a model or a dataset) in its
        info, its list of refs and the ``X-Repo-Commit`` of its ``/resolve/`` answers, and serve the files of its
        default branch under ``sha`` as a revision (a hub that lies does so consistently), and ``etag`` as the
        ``ETag`` (and ``X-Linked-Etag``) of its files' ``/resolve/`` answers; None leaves that value true."""
        with self._lock:
            claims = {key: value for key, value in (("sha", sha), ("etag", etag)) if value is not None}
            if claims:
                self._claims[repo_id] = claims
            else:
                self._claims.pop(repo_id, None)

    def mislink_tree(self, *, origin: str | None = None, endless: bool = False) -> None:
        """From now on the ``Link`` header of a dataset's tree pages lies: it names the next page on ``origin``
        (``cdn_url``, say: the other server records whether the token came) instead of the Hub's own, and with
        ``endless`` after every page, the last one too (the pages past the end are empty): a chain without end.
        ``mislink_tree()`` links the pages truly again."""
        with self._lock:
            self._tree_links = (origin, endless)

    def trickle(self, seconds: float | None, path: str = "", *, headers: bool = False) -> None:
        """From now on send the body of every answer on either origin whose path holds ``path`` one byte at a time,
        ``seconds`` apart (with ``headers=True`` the status line and headers too), as a slow link does; the
        connection is kept until the client hangs up. ``seconds=None`` stops it."""
        with self._lock:
            self._trickle = None if seconds is None else (float(seconds), path, headers)

    def ignore_ranges(self, path: str | None = "") -> None:
        """From now on answer a ``Range`` request on either origin whose path holds ``path`` with ``200`` and the
        whole file, as a server that does not do ranges; ``None`` honours ranges again."""
        with self._lock:
            self._whole_answers = path

    def _pace(self, path: str, headers: bool) -> float:
        """Seconds between two bytes of an answer to ``path`` (its headers when ``headers``); 0 for no pause."""
        with self._lock:
            pace = self._trickle
        if pace is None or pace[1] not in path or (headers and not pace[2]):
            return 0.0
        return pace[0]

    def _write(self, h: _Handler, data: bytes, headers: bool = False) -> None:
        """``data`` to the connection, a byte at a time when :meth:`trickle` says so."""
        pace = self._pace(h.path, headers)
        if not pace:
            h.wfile.write(data)
            return
        for i in range(len(data)):
            time.sleep(pace)
            h.wfile.write(data[i : i + 1])

    def _take(self, fault: str, path: str, method: str) -> tuple | None:
        """The first queued one-shot ``fault`` matching this request, removed and recorded; None when none is."""
        with self._lock:
            for i, (kind, substring, wanted, value) in enumerate(self._once):
                if kind == fault and substring in path and wanted in (None, method):
                    del self._once[i]
                    self.faults.append((fault, path))
                    return (value,)
        return None

    def _fault(self, h: _Handler, method: str, cdn: bool) -> bool:
        """Inject the faults switched on for this request; True when one of them answered it."""
        stall = self._take("stalled", h.path, method)
        if stall is not None:
            time.sleep(stall[0])
        with self._lock:
            delay, where = self._delay
        if delay and where in h.path:
            time.sleep(delay)
        with self._lock:
            rate = None if cdn or self._rate is None or self._rate[3] not in h.path else self._rate
            if rate is not None:
                self._rate_count += 1
                if self._rate_count % rate[0]:
                    rate = None
                else:
                    self.faults.append(("rate limited", h.path))
        if rate is not None:
            _, retry_after, reset, _ = rate
            extra = {} if retry_after is None else {"Retry-After": str(retry_after)}
            if reset is not None:
                extra |= {"RateLimit": f'"api";r=0;t={reset}', "RateLimit-Policy": '"fixed window";"api";q=500;w=300'}
            self._error(h, method, 429, None, "You have exceeded our rate limit: retry later", extra)
            return True
        failed = self._take("failed", h.path, method)
        if failed is not None:
            self._error(h, method, failed[0], None, f"Internal error (HTTP {failed[0]})")
            return True
        return False

    # -- counters --------------------------------------------------------------------------------------------------

    def bytes_served_for(self, repo_id: str, filename: str | None = None) -> int:
        """Body bytes sent for ``/resolve/`` and CDN GETs of ``repo_id``'s files (of ``filename`` alone, when given);
        a model and a dataset of one id are counted together."""
        with self._lock:
            if filename is None:
                return self._served.get(repo_id, 0)
            return self._served_files.get((repo_id, filename), 0)

    def requests_for(self, repo_id: str, filename: str | None = None) -> list[tuple[str, str, str | None]]:
        """The requests to the Hub's origin, then the CDN's, whose path names ``repo_id`` (and file ``filename`` of
        it, through ``/resolve/`` or the CDN, when given): ``(method, path, Range)``; a model and a dataset of one
        id are counted together."""

        def named(path: str) -> bool:
            names = _names(path)
            return names is not None and names[0] == repo_id and filename in (None, names[1])

        with self._lock:
            hub = [r for r in self.requests if named(r[1])]
            cdn = [r[:3] for r in self.cdn_requests if named(r[1])]
        return hub + cdn

    def reset_counters(self) -> None:
        """Zero ``bytes_served`` (all repositories) and empty ``requests``, ``statuses``, ``cdn_requests`` and
        ``faults``, and the :meth:`calls` per bucket (the faults and quotas switched on stay on)."""
        with self._lock:
            self.bytes_served = 0
            self._served.clear()
            self._served_files.clear()
            for record in (self.requests, self.statuses, self.cdn_requests, self.faults, self._calls):
                record.clear()

    def _sent(self, role: str, status: int) -> None:
        if role == "hub":
            with self._lock:
                self.statuses.append(status)

    # -- serving ---------------------------------------------------------------------------------------------------

    def _handle(self, h: _Handler, method: str) -> None:
        cdn = h.server.role == "cdn"
        with self._lock:
            if cdn:
                self.cdn_requests.append((method, h.path, h.headers.get("Range"), "Authorization" in h.headers))
            else:
                self.requests.append((method, h.path, h.headers.get("Range")))
        parts = urlsplit(h.path)
        if self._realism(h, method, parts.path, cdn) or self._fault(h, method, cdn):
            return
        if method == "POST":
            if not cdn and (m := _PATHS_INFO.match(parts.path)):
                kind = DATASET if m["kind"] == "datasets" else "model"
                self._paths_info(h, unquote(m["repo"]), unquote(m["rev"]), kind)
            else:
                self._error(h, method, 405 if _names(parts.path) else 404, None, f"No POST route: {parts.path}")
            return
        if cdn:
            if m := _DATASET_CDN.match(parts.path):
                self._cdn(h, method, unquote(m["repo"]), m["commit"], unquote(m["file"]), DATASET)
            elif m := _CDN.match(parts.path):
                self._cdn(h, method, unquote(m["repo"]), m["commit"], unquote(m["file"]))
            else:
                self._error(h, method, 404, None, f"Not found: {parts.path}")
            return
        if self._realism_route(h, method, parts.path) or self._dataset_route(h, method, parts):
            return
        m = _REFS.match(parts.path) or _API.match(parts.path) or _RESOLVE.match(parts.path)
        with self._lock:
            new_id = self._renamed.get(unquote(m["repo"])) if m else None
        if new_id is not None:
            begin, end = m.span("repo")
            location = (
                parts.path[:begin] + quote(new_id) + parts.path[end:] + (f"?{parts.query}" if parts.query else "")
            )
            self._send(h, method, 307, {"Location": location, "Content-Type": "text/plain"})
        elif m := _REFS.match(parts.path):
            self._refs(h, method, unquote(m["repo"]))
        elif m := _API.match(parts.path):
            rev = unquote(m["rev"]) if m["rev"] else None
            self._model_info(h, method, unquote(m["repo"]), rev, parse_qs(parts.query))
        elif m := _RESOLVE.match(parts.path):
            self._resolve(h, method, unquote(m["repo"]), unquote(m["rev"]), unquote(m["file"]))
        else:
            self._error(h, method, 404, None, f"Not found: {parts.path}")

    def _dataset_route(self, h: _Handler, method: str, parts) -> bool:
        """Answer a dataset repository's request (module docstring); False when the path is not one."""
        path = parts.path
        if m := _DATASET_REFS.match(path):
            found = self._lookup(h, method, unquote(m["repo"]), None, files=False, kind=DATASET)
            if found is not None:
                with self._lock:
                    sha = self._claims.get(unquote(m["repo"]), {}).get("sha")
                self._send_json(h, method, _refs_of(found[0], sha))
        elif m := _DATASET_TREE.match(path):
            path_in_repo = unquote(m["path"]).strip("/") if m["path"] else ""
            self._tree(h, method, unquote(m["repo"]), unquote(m["rev"]), path_in_repo, parse_qs(parts.query))
        elif m := _DATASET_API.match(path):
            rev = unquote(m["rev"]) if m["rev"] else None
            found = self._lookup(h, method, unquote(m["repo"]), rev, files=False, kind=DATASET)
            if found is not None:
                self._send_json(h, method, self._dataset_info(unquote(m["repo"]), *found))
        elif m := _DATASET_RESOLVE.match(path):
            self._resolve(h, method, unquote(m["repo"]), unquote(m["rev"]), unquote(m["file"]), DATASET)
        else:
            return False
        return True

    def _dataset_info(self, repo_id: str, repo: _Repo, commit: str) -> dict:
        """What :class:`huggingface_hub.DatasetInfo` parses of a dataset repository at ``commit``."""
        entries = repo.commits[commit]
        with self._lock:
            sha = self._claims.get(repo_id, {}).get("sha", commit)
        return {
            "_id": commit[:24],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": sha,
            "lastModified": LAST_MODIFIED,
            "createdAt": LAST_MODIFIED,
            "private": False,
            "gated": "manual" if repo.gated_token is not None else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": [{"rfilename": name} for name in sorted(entries)],
            "usedStorage": sum(e.size for e in entries.values()),
        }

    def _tree(self, h: _Handler, method: str, repo_id: str, revision: str, path: str, query: dict) -> None:
        """``GET /api/datasets/{id}/tree/{rev}[/{path}]``: the files and folders under ``path`` (all levels with
        ``recursive=true``, else its direct children), in path order, :attr:`tree_page_size` per page, the next page
        named by a ``Link: <...>; rel="next"`` header with a ``cursor``; 404 ``EntryNotFound`` for a path that holds
        nothing."""
        found = self._lookup(h, method, repo_id, revision, files=False, kind=DATASET)
        if found is None:
            return
        repo, commit = found
        recursive = query.get("recursive", ["false"])[-1].lower() in ("1", "true")
        entries = _tree_entries(repo.commits[commit], path, recursive)
        if path and not entries:
            self._error(h, method, 404, "EntryNotFound", f"{path} does not exist on {revision}")
            return
        start = int(query.get("cursor", ["0"])[-1])
        page = entries[start : start + self.tree_page_size]
        headers = {}
        with self._lock:
            origin, endless = self._tree_links
        if endless or start + self.tree_page_size < len(entries):
            cursor = {**{k: v[-1] for k, v in query.items()}, "cursor": str(start + self.tree_page_size)}
            following = "&".join(f"{k}={quote(v, safe='')}" for k, v in cursor.items())
            headers["Link"] = f'<{origin or self.url}{urlsplit(h.path).path}?{following}>; rel="next"'
        self._send_json(h, method, page, headers)

    def _paths_info(self, h: _Handler, repo_id: str, revision: str, kind: str) -> None:
        """``POST /api/{models,datasets}/{id}/paths-info/{rev}``: the entry of each path asked for that exists."""
        found = self._lookup(h, "POST", repo_id, revision, files=False, kind=kind)
        if found is None:
            return
        body, content_type = h.body.decode(errors="replace"), h.headers.get("Content-Type", "")
        if "json" in content_type:
            paths = json.loads(body or "{}").get("paths", [])
            paths = [paths] if isinstance(paths, str) else paths
        else:
            paths = parse_qs(body).get("paths", [])
        files = found[0].commits[found[1]]
        entries = [_path_entry(files, path.strip("/")) for path in paths]
        self._send_json(h, "POST", [entry for entry in entries if entry is not None])

    def _send_json(self, h: _Handler, method: str, value, headers: dict | None = None) -> None:
        body = json.dumps(value).encode()
        self._send(h, method, 200, {"Content-Type": "application/json", **(headers or {})}, body)

    def _send(self, h: _Handler, method: str, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if method != "HEAD":
            self._write(h, body)

    def _error(self, h, method, status: int, code: str | None, message: str, extra: dict | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code is not None:
            headers["X-Error-Code"] = code
        self._send(h, method, status, headers, json.dumps({"error": message}).encode())

    def _lookup(self, h: _Handler, method: str, repo_id: str, revision: str | None, files: bool, kind: str = "model"):
        """The repo and commit (``revision`` None: the default branch), or None after sending the Hub's error."""
        with self._lock:
            repo = (self._datasets if kind == DATASET else self._repos).get(repo_id)
        auth = h.headers.get("Authorization")
        if repo is None:
            message = "Repository not found"
            self._error(h, method, 401 if auth is None else 404, "RepoNotFound", message)
            return None
        if files and repo.gated_token is not None and auth != f"Bearer {repo.gated_token}":
            message = f"Access to {kind} {repo_id} is restricted"
            if auth is None:
                message += ". You must have access to it and be authenticated to access it. Please log in."
            else:
                message += f" and you are not in the authorized list. Visit {self.url}/{repo_id} to ask for access."
            self._error(h, method, 401 if auth is None else 403, "GatedRepo", message)
            return None
        with self._lock:
            revision = revision or repo.default()
            commit = repo.commit(revision)
            if commit is None and revision == self._claims.get(repo_id, {}).get("sha"):
                commit = repo.commit(repo.default())  # the lie, told as a revision: the files of the default branch
        if commit is None:
            self._error(h, method, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo, commit

    def _model_info(self, h, method, repo_id: str, revision: str | None, query: dict) -> None:
        found = self._lookup(h, method, repo_id, revision, files=False)
        if found is None:
            return
        repo, commit = found
        entries = repo.commits[commit]
        with self._lock:
            claimed = self._claims.get(repo_id, {})
        blobs = query.get("blobs", ["false"])[-1].lower() in ("1", "true")
        siblings = []
        for name, entry in entries.items():
            sibling: dict = {"rfilename": name}
            if blobs:
                sibling.update(size=entry.size, blobId=entry.blob_id)
                if entry.lfs:
                    sibling["lfs"] = {"size": entry.size, "sha256": entry.sha256, "pointerSize": entry.pointer_size}
            siblings.append(sibling)
        info = {
            "_id": commit[:24],
            "id": repo_id,
            "modelId": repo_id,
            "author": repo_id.split("/")[0] if "/" in repo_id else None,
            "sha": claimed.get("sha", commit),
            "lastModified": LAST_MODIFIED,
            "createdAt": LAST_MODIFIED,
            "private": False,
            "gated": "manual" if repo.gated_token is not None else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "siblings": siblings,
            "spaces": [],
            "usedStorage": sum(e.size for e in entries.values()),
        }
        config = entries.get("config.json")
        if config is not None and not config.lfs:
            try:
                cfg = json.loads(config.content)
                info["config"] = {k: cfg[k] for k in ("architectures", "model_type") if k in cfg}
            except (ValueError, TypeError):
                pass
        self._send(h, method, 200, {"Content-Type": "application/json"}, json.dumps(info).encode())

    def _refs(self, h, method, repo_id: str) -> None:
        found = self._lookup(h, method, repo_id, None, files=False)
        if found is None:
            return
        with self._lock:
            listing = _refs_of(found[0], self._claims.get(repo_id, {}).get("sha"))
        self._send_json(h, method, listing)

    def _resolve(self, h: _Handler, method: str, repo_id: str, revision: str, filename: str, kind="model") -> None:
        found = self._lookup(h, method, repo_id, revision, files=True, kind=kind)
        if found is None:
            return
        repo, commit = found
        with self._lock:
            claimed = self._claims.get(repo_id, {})
        entry = repo.commits[commit].get(filename)
        if entry is None:
            told = claimed.get("sha", commit)
            self._error(h, method, 404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": told})
            return
        with self._lock:
            redirect = self._redirect_min is not None and entry.lfs and entry.size >= self._redirect_min
        etag = claimed.get("etag")
        if redirect:
            where = "datasets/" if kind == DATASET else ""
            location, xet = self._cdn_link(
                f"/cdn/{where}{quote(repo_id)}/{commit}/{quote(filename)}", repo_id, commit, entry, kind
            )
            headers = {
                **xet,
                "Location": location,
                "X-Linked-Size": str(entry.size),
                "X-Linked-Etag": f'"{etag or entry.sha256}"',
                "X-Repo-Commit": claimed.get("sha", commit),
                "ETag": f'"{entry.blob_id}"',
                "Content-Type": "text/plain; charset=utf-8",
            }
            self._send(h, method, 302, headers, f"Found. Redirecting to {location}".encode())
            return
        if self._cached_redirect(h, method, repo_id, commit, filename, entry, kind):
            return
        headers = {"Accept-Ranges": "bytes", "ETag": f'"{etag or entry.etag}"'}
        headers["X-Repo-Commit"] = claimed.get("sha", commit)
        self._serve(h, method, repo_id, filename, entry, headers)

    def _cdn(self, h: _Handler, method: str, repo_id: str, commit: str, filename: str, kind="model") -> None:
        """A file of a commit, as the CDN serves it: no token asked for, no ``X-Repo-Commit``; a signed link checked
        (:meth:`sign_links`), the whole file gzipped (:meth:`cdn_gzip`) when so switched."""
        parts = urlsplit(h.path)
        if self._link_refused(h, method, parts.path, parts.query):
            return
        with self._lock:
            repo = (self._datasets if kind == DATASET else self._repos).get(repo_id)
            entry = repo.commits.get(commit, {}).get(filename) if repo is not None else None
        if entry is None:
            self._error(h, method, 404, None, "NoSuchKey")
            return
        serve = self._serve_gzip if self._gzips(h) else self._serve
        serve(h, method, repo_id, filename, entry, {"Accept-Ranges": "bytes", "ETag": f'"{entry.sha256}"'})

    def _serve(self, h: _Handler, method: str, repo_id: str, filename: str, entry: HubFile, headers: dict) -> None:
        """The bytes of ``entry``: the whole file (200) or the range asked for (206, or 416), cut short when
        :meth:`truncate` or :meth:`break_once` says so."""
        size = entry.size
        headers = {"Content-Type": "application/octet-stream", **headers}
        start, end, status = 0, size, 200
        value = h.headers.get("Range")
        with self._lock:
            whole = self._whole_answers is not None and self._whole_answers in h.path
        if value is not None and not whole:
            m = _RANGE.match(value)
            if "," in value or (m and _unsatisfiable(m, size)):
                headers["Content-Range"] = f"bytes */{size}"
                self._error(h, method, 416, None, f"Range not satisfiable: {value} (size {size})", headers)
                return
            if m and (m[1] or m[2]) and not (m[1] and m[2] and int(m[2]) < int(m[1])):  # else malformed: ignore it
                if m[1]:
                    start, end = int(m[1]), size if not m[2] else min(int(m[2]) + 1, size)
                else:
                    start, end = max(0, size - int(m[2])), size
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        h.send_response(status)
        for key, val in headers.items():
            h.send_header(key, val)
        h.send_header("Content-Length", str(end - start))
        h.end_headers()
        if method == "HEAD":
            return
        with self._lock:
            keep = self._truncated.get((repo_id, filename))
        broken = self._take("broken", h.path, method) if end > start else None
        if broken is not None:
            once = (end - start) // 2 if broken[0] is None else broken[0]
            keep = once if keep is None else min(keep, once)
        stop = end if keep is None else min(end, start + keep)
        pos = start
        try:
            while pos < stop:
                chunk = entry.read(pos, min(stop, pos + CHUNK))
                self._count_served(repo_id, filename, len(chunk))  # before the write: a client that read it sees it
                self._write(h, chunk)
                pos += len(chunk)
        except OSError:  # the client went away
            h.close_connection = True
            return
        if stop < end:
            h.close_connection = True  # the rest of the announced body never comes

    def _count_served(self, repo_id: str, filename: str, n: int) -> None:
        with self._lock:
            self.bytes_served += n
            self._served[repo_id] = self._served.get(repo_id, 0) + n
            key = (repo_id, filename)
            self._served_files[key] = self._served_files.get(key, 0) + n


def _unsatisfiable(m: re.Match, size: int) -> bool:
    """Whether a single ``bytes=`` range selects nothing of a ``size``-byte file (-> 416)."""
    if m[1]:
        return int(m[1]) >= size and not (m[2] and int(m[2]) < int(m[1]))
    return bool(m[2]) and (int(m[2]) == 0 or size == 0)


def _refs_of(repo: _Repo, sha: str | None = None) -> dict[str, list]:
    """The branches and tags of ``repo`` as ``GET /api/{models,datasets}/{id}/refs`` lists them (each pointing to
    ``sha`` when given: :meth:`StandinHub.misreport`)."""
    listing: dict[str, list] = {"branches": [], "tags": [], "converts": [], "pullRequests": []}
    for name, commit in sorted(repo.refs.items()):
        kind, prefix = ("tags", "refs/tags/") if name in repo.tags else ("branches", "refs/heads/")
        listing[kind].append({"name": name, "ref": prefix + name, "targetCommit": sha or commit})
    return listing


def _names(path: str) -> tuple[str, str | None] | None:
    """``(repo_id, file)`` a request's path (as sent: quoted, maybe with a query) names, ``file`` None for an API
    route; None for a path of no route."""
    path = urlsplit(path).path
    for route in _ROUTES:
        if m := route.match(path):
            file = m.groupdict().get("file")
            return unquote(m["repo"]), unquote(file) if file else None
    return None


def _file_entry(name: str, entry: HubFile) -> dict:
    """A file's tree entry (``RepoFile`` JSON), with ``lfs`` for an LFS file."""
    item = {"type": "file", "oid": entry.blob_id, "size": entry.size, "path": name}
    if entry.lfs:
        item["lfs"] = {"oid": entry.sha256, "size": entry.size, "pointerSize": entry.pointer_size}
    return item


def _folder_entry(folder: str) -> dict:
    return {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(), "path": folder}


def _path_entry(files: dict[str, HubFile], path: str) -> dict | None:
    """The entry of the file or folder ``path`` of ``files``; None when it holds nothing."""
    if path in files:
        return _file_entry(path, files[path])
    return _folder_entry(path) if path and any(n.startswith(f"{path}/") for n in files) else None


def _tree_entries(files: dict[str, HubFile], path: str, recursive: bool) -> list[dict]:
    """The tree entries (``RepoFile``/``RepoFolder`` JSON) of ``files`` under folder ``path`` ("" for the root), or
    the one file ``path`` names."""
    if path in files:
        names, base = [path], path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    else:
        base = f"{path}/" if path else ""
        names = [n for n in files if n.startswith(base)]
    found: dict[str, dict] = {}
    for name in names:
        rest = name[len(base) :].split("/")
        depth = len(rest) if recursive else 1
        for i in range(1, min(depth, len(rest) - 1) + 1):
            folder = base + "/".join(rest[:i])
            found.setdefault(folder, _folder_entry(folder))
        if recursive or len(rest) == 1 or name == path:
            found[name] = _file_entry(name, files[name])
    return [found[k] for k in sorted(found)]
