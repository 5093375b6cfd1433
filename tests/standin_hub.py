"""A stand-in Hugging Face Hub for offline tests: a threaded HTTP server on 127.0.0.1 serving in-memory repositories.

It speaks the part of the Hub protocol that ``huggingface_hub`` 2.4 uses to resolve a model and read its files:

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
  206/416. No redirect to a CDN (files are served directly with 200, so there is no ``X-Linked-Etag``) and no Xet
  headers (``X-Xet-Hash`` ...), so ``hf_hub_download`` takes the plain HTTP path even with ``hf_xet`` installed.
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

  Any other path gets a plain 404 (``HfHubHTTPError``); ``list_repo_tree``/``snapshot_download`` are not supported.

The endpoint: ``huggingface_hub`` reads ``HF_ENDPOINT`` once, at import time, into
``huggingface_hub.constants.ENDPOINT`` (and ``HF_HUB_OFFLINE`` into ``constants.HF_HUB_OFFLINE``, which
``huggingface_hub.is_offline_mode()`` returns), so setting the variables later has no effect on it. Tests
pass ``endpoint=hub.url`` explicitly (``HfApi(endpoint=...)``, ``hf_hub_download(endpoint=...)``,
``hf_hub_url(endpoint=...)``); the project's code should pick the endpoint up at call time with
``os.environ.get("HF_ENDPOINT") or huggingface_hub.constants.ENDPOINT`` so that a test can ``monkeypatch.setenv`` it.

Usage::

    with StandinHub() as hub:
        commit = hub.add_repo("org/tiny", {"config.json": b"{}", "model.safetensors": data})
        HfApi(endpoint=hub.url).model_info("org/tiny").sha == commit
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["SparseFile", "StandinHub", "sparse_safetensors"]

CHUNK = 1 << 20  # bytes per socket write of a file body
LFS_MIN_SIZE = 10 << 20  # the Hub stores files from 10 MiB on with LFS (ETag = sha256)
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf", ".npz", ".model")
LAST_MODIFIED = "2024-01-01T00:00:00.000Z"

# safetensors dtypes: bytes per element, in the order the safetensors library sorts tensors by (ascending; the
# library writes the largest first, then by name).
DTYPE_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "F16": 2, "BF16": 2, "I32": 4, "F32": 4, "F64": 8, "I64": 8}
_DTYPE_RANK = {name: rank for rank, name in enumerate(DTYPE_SIZES)}

_REFS = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)/refs/?$")
_API = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<rev>[^/]+))?/?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class SparseFile:
    """A large file that is not held in memory: ``size`` bytes, of which only ``segments`` are stored.

    Args:
        size: total length in bytes.
        segments: ``{offset: bytes}``; segments must lie inside the file and must not overlap. Every byte outside
            them reads as zero.
    """

    def __init__(self, size: int, segments: dict[int, bytes]):
        self.size = int(size)
        self._offsets = sorted(segments)
        self._data = [bytes(segments[o]) for o in self._offsets]
        end = 0
        for offset, data in zip(self._offsets, self._data):
            if offset < end:
                raise ValueError(f"segment at {offset} overlaps the previous one (which ends at {end})")
            end = offset + len(data)
        if end > self.size:
            raise ValueError(f"segments end at {end}, past the file size {self.size}")

    def __len__(self) -> int:
        return self.size

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` (``end`` defaults to the size), zeros where no segment is stored."""
        end = self.size if end is None else min(end, self.size)
        start = max(0, start)
        if end <= start:
            return b""
        out = bytearray(end - start)
        # The last segment starting at or before `start` may overlap the range; then every one starting before `end`.
        first = max(0, bisect.bisect_right(self._offsets, start) - 1)
        for i in range(first, len(self._offsets)):
            offset, data = self._offsets[i], self._data[i]
            if offset >= end:
                break
            lo, hi = max(start, offset), min(end, offset + len(data))
            if lo < hi:
                out[lo - start : hi - start] = data[lo - offset : hi - offset]
        return bytes(out)

    def fingerprint(self) -> str:
        """A stable sha256 of the size and the stored segments (not of the content: it never reads the zeros)."""
        digest = hashlib.sha256(f"sparse:{self.size}".encode())
        for offset, data in zip(self._offsets, self._data):
            digest.update(f":{offset}:{len(data)}:".encode())
            digest.update(hashlib.sha256(data).digest())
        return digest.hexdigest()


def sparse_safetensors(
    tensors: dict[str, tuple[str, list[int]]],
    stored: dict[str, bytes],
    *,
    metadata: dict[str, str] | None = None,
) -> SparseFile:
    """A safetensors file as a :class:`SparseFile`: a real header, the ``stored`` tensors' bytes, zeros elsewhere.

    The layout is the safetensors library's own (``safetensors.torch.save`` writes the same bytes for the same tensors):
    8-byte little-endian header length, compact JSON header (``__metadata__`` first, then each tensor's ``dtype``,
    ``shape``, ``data_offsets``), padded with spaces to a multiple of 8, then the data, tensors ordered by dtype size
    (largest first) then by name.

    Args:
        tensors: ``{name: (dtype, shape)}``, dtype one of ``DTYPE_SIZES`` (``"F32"``, ``"BF16"``, ``"F16"``, ...).
        stored: ``{name: raw little-endian bytes}`` for the tensors whose values matter (e.g. query/key weights);
            each must have exactly the tensor's size.
        metadata: the ``__metadata__`` entry; ``{"format": "pt"}`` (what transformers writes) when None; ``{}`` omits
            it.
    """
    unknown = set(stored) - set(tensors)
    if unknown:
        raise KeyError(f"stored tensors not in `tensors`: {sorted(unknown)}")
    header: dict = {}
    meta = {"format": "pt"} if metadata is None else metadata
    if meta:
        header["__metadata__"] = meta
    segments: dict[int, bytes] = {}
    offset = 0
    for name in sorted(tensors, key=lambda n: (-_DTYPE_RANK[tensors[n][0]], n)):
        dtype, shape = tensors[name]
        count = 1
        for dim in shape:
            count *= int(dim)
        nbytes = count * DTYPE_SIZES[dtype]
        header[name] = {"dtype": dtype, "shape": [int(d) for d in shape], "data_offsets": [offset, offset + nbytes]}
        if name in stored:
            if len(stored[name]) != nbytes:
                raise ValueError(f"{name}: {len(stored[name])} bytes stored, {nbytes} expected for {dtype}{shape}")
            segments[offset] = bytes(stored[name])
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    start = 8 + len(text)
    return SparseFile(
        start + offset, {0: struct.pack("<Q", len(text)) + text, **{start + o: d for o, d in segments.items()}}
    )


class _File:
    """One file of a commit, with what the Hub reports about it."""

    def __init__(self, name: str, content: bytes | SparseFile):
        if isinstance(content, SparseFile):
            self.content, self.size, self.lfs = content, content.size, True
            self.sha256 = content.fingerprint()
        else:
            self.content, self.size = bytes(content), len(content)
            self.lfs = self.size >= LFS_MIN_SIZE or name.endswith(LFS_SUFFIXES)
            self.sha256 = hashlib.sha256(self.content).hexdigest()
        if self.lfs:  # git stores the LFS pointer file
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n"
            git = pointer.encode()
        else:
            git = self.content
        self.blob_id = hashlib.sha1(b"blob %d\0" % len(git) + git).hexdigest()
        self.pointer_size = len(git)
        self.etag = self.sha256 if self.lfs else self.blob_id

    def read(self, start: int, end: int) -> bytes:
        if isinstance(self.content, SparseFile):
            return self.content.read(start, end)
        return self.content[start:end]


class _Repo:
    def __init__(self):
        self.refs: dict[str, str] = {}  # branch/tag -> commit
        self.tags: set[str] = set()  # the refs that are tags, not branches
        self.commits: dict[str, dict[str, _File]] = {}
        self.gated_token: str | None = None

    def default(self) -> str:
        return "main" if "main" in self.refs else next(iter(self.refs))

    def commit(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, hub: StandinHub):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.hub = hub
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
    timeout = 30  # idle kept-alive connections are dropped after this many seconds
    server: _Server

    def do_GET(self):
        self.server.hub._handle(self, "GET")

    def do_HEAD(self):
        self.server.hub._handle(self, "HEAD")

    def log_message(self, format, *args):
        pass


class StandinHub:
    """A local Hugging Face Hub: repositories of in-memory files served on ``http://127.0.0.1:PORT``.

    Use as a context manager (``with StandinHub() as hub:``) or with :meth:`start`/:meth:`stop`. Repositories may be
    added before or while it runs. Counters, all thread-safe:

    * ``bytes_served``: body bytes handed to the connection for ``/resolve/`` GETs, all repositories;
      :meth:`bytes_served_for` per repo;
    * ``requests``: ``(method, path, Range header or None)`` per request, ``path`` as sent (URL-quoted, with the query).
    """

    def __init__(self):
        self.url = ""
        self.bytes_served = 0
        self.requests: list[tuple[str, str, str | None]] = []
        self._served: dict[str, int] = {}
        self._repos: dict[str, _Repo] = {}
        self._truncated: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def start(self) -> StandinHub:
        """Start serving on a free port of 127.0.0.1 (a new port if it was stopped before); sets ``url``."""
        if self._server is None:
            self._server = _Server(self)
            self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="standin-hub", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and cut open connections; later requests to ``url`` are refused."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.close_connections()
            server.server_close()
            self._thread.join(timeout=5)

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
    ) -> str:
        """Add (or move) branch ``revision`` of ``repo_id`` to a commit holding ``files``; returns the commit sha.

        The commit is the sha1 of the repo id and the files' names and ETags, so the same content gives the same
        commit; older commits stay reachable by their sha. ``gated_token`` gates the whole repository (all
        revisions): file downloads then need ``Authorization: Bearer <gated_token>``. ``tag=True`` makes ``revision``
        a tag (as Ettin's ``step*`` checkpoints are) instead of a branch (as Pythia's are).
        """
        entries = {name: _File(name, content) for name, content in files.items()}
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(entries):
            digest.update(f"\0{name}\0{entries[name].etag}".encode())
        commit = digest.hexdigest()
        with self._lock:
            repo = self._repos.setdefault(repo_id, _Repo())
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
            if repo_id not in self._repos:
                raise KeyError(repo_id)
            if keep is None:
                self._truncated.pop((repo_id, filename), None)
            else:
                self._truncated[(repo_id, filename)] = int(keep)

    # -- counters --------------------------------------------------------------------------------------------------

    def bytes_served_for(self, repo_id: str) -> int:
        """Body bytes sent for ``/resolve/`` GETs of ``repo_id``."""
        with self._lock:
            return self._served.get(repo_id, 0)

    def reset_counters(self) -> None:
        """Zero ``bytes_served`` (all repositories) and empty ``requests``."""
        with self._lock:
            self.bytes_served = 0
            self._served.clear()
            self.requests.clear()

    # -- serving ---------------------------------------------------------------------------------------------------

    def _handle(self, h: _Handler, method: str) -> None:
        with self._lock:
            self.requests.append((method, h.path, h.headers.get("Range")))
        parts = urlsplit(h.path)
        if m := _REFS.match(parts.path):
            self._refs(h, method, unquote(m["repo"]))
        elif m := _API.match(parts.path):
            rev = unquote(m["rev"]) if m["rev"] else None
            self._model_info(h, method, unquote(m["repo"]), rev, parse_qs(parts.query))
        elif m := _RESOLVE.match(parts.path):
            self._resolve(h, method, unquote(m["repo"]), unquote(m["rev"]), unquote(m["file"]))
        else:
            self._error(h, method, 404, None, f"Not found: {parts.path}")

    def _send(self, h: _Handler, method: str, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if method != "HEAD":
            h.wfile.write(body)

    def _error(self, h, method, status: int, code: str | None, message: str, extra: dict | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code is not None:
            headers["X-Error-Code"] = code
        self._send(h, method, status, headers, json.dumps({"error": message}).encode())

    def _lookup(self, h: _Handler, method: str, repo_id: str, revision: str | None, files: bool):
        """The repo and commit (``revision`` None: the default branch), or None after sending the Hub's error."""
        with self._lock:
            repo = self._repos.get(repo_id)
        auth = h.headers.get("Authorization")
        if repo is None:
            message = "Repository not found"
            self._error(h, method, 401 if auth is None else 404, "RepoNotFound", message)
            return None
        if files and repo.gated_token is not None and auth != f"Bearer {repo.gated_token}":
            message = f"Access to model {repo_id} is restricted"
            if auth is None:
                message += ". You must have access to it and be authenticated to access it. Please log in."
            else:
                message += f" and you are not in the authorized list. Visit {self.url}/{repo_id} to ask for access."
            self._error(h, method, 401 if auth is None else 403, "GatedRepo", message)
            return None
        with self._lock:
            revision = revision or repo.default()
            commit = repo.commit(revision)
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
            "sha": commit,
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
        repo = found[0]
        with self._lock:
            refs = sorted(repo.refs.items())
            tags = set(repo.tags)
        listing: dict[str, list] = {"branches": [], "tags": [], "converts": [], "pullRequests": []}
        for name, commit in refs:
            kind, prefix = ("tags", "refs/tags/") if name in tags else ("branches", "refs/heads/")
            listing[kind].append({"name": name, "ref": prefix + name, "targetCommit": commit})
        self._send(h, method, 200, {"Content-Type": "application/json"}, json.dumps(listing).encode())

    def _resolve(self, h: _Handler, method: str, repo_id: str, revision: str, filename: str) -> None:
        found = self._lookup(h, method, repo_id, revision, files=True)
        if found is None:
            return
        repo, commit = found
        entry = repo.commits[commit].get(filename)
        if entry is None:
            self._error(h, method, 404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
            return
        size = entry.size
        headers = {
            "Content-Type": "application/octet-stream",
            "Accept-Ranges": "bytes",
            "ETag": f'"{entry.etag}"',
            "X-Repo-Commit": commit,
        }
        start, end, status = 0, size, 200
        value = h.headers.get("Range")
        if value is not None:
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
        stop = end if keep is None else min(end, start + keep)
        pos = start
        try:
            while pos < stop:
                chunk = entry.read(pos, min(stop, pos + CHUNK))
                with self._lock:  # counted before the write, so a client that has read the body sees the count
                    self.bytes_served += len(chunk)
                    self._served[repo_id] = self._served.get(repo_id, 0) + len(chunk)
                h.wfile.write(chunk)
                pos += len(chunk)
        except OSError:  # the client went away
            h.close_connection = True
            return
        if stop < end:
            h.close_connection = True  # the rest of the announced body never comes


def _unsatisfiable(m: re.Match, size: int) -> bool:
    """Whether a single ``bytes=`` range selects nothing of a ``size``-byte file (-> 416)."""
    if m[1]:
        return int(m[1]) >= size and not (m[2] and int(m[2]) < int(m[1]))
    return bool(m[2]) and (int(m[2]) == 0 or size == 0)
