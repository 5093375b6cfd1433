"""Models named by hub id, ``ORG/NAME[@REVISION]``: resolved through ``huggingface_hub``, query/key bytes only.

The environment is read at call time, so ``HF_ENDPOINT``, ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN``
behave as with any hub client. For a model, in this order:

1. a complete snapshot of that revision in the hub cache (``huggingface-cli download`` made one): read locally;
2. a manifest of an earlier run in attnstruct's range cache (the revision's commit, files, sizes and digests): no
   request;
3. otherwise one model info request (what ``model_info(files_metadata=True)`` asks, made by the hub client) gives
   the commit, the file list, each file's size and each LFS file's sha256, kept as that manifest (a manifest of an
   older run without sizes or digests is refreshed once, online).

A revision without any weight file (a branch with only ``config.json``, as some PolyPythia branches are:
EleutherAI/pythia#202) fails with the kind ``no weights``. The weight files' digests, as the hub states them, become
the model's :attr:`HubModel.weights_sha256`, by which two checkpoints holding byte-identical weights are told apart
from two that merely score alike (checkpoint branches copied from later ones: EleutherAI/pythia#205, #206,
allenai/OLMo#915), without a byte of the weights downloaded.

Then ``config.json`` (and the shard index) come through the hub client into attnstruct's cache (the files of a
commit, ``<cache>/<org>--<name>/files/<commit>/``), and only the query/key tensors come by Range request, with what
locates them: each safetensors shard's header (:mod:`attnstruct.checkpoints.remote_safetensors`), or each
``pytorch_model.bin`` shard's ZIP directory and pickled tensor metadata
(:mod:`attnstruct.checkpoints.remote_torch_bin`; the pickle is never run). Whole shards are never downloaded. A
legacy ``pytorch_model.bin`` (torch before 1.6, not a ZIP archive) and a repository with only one ``.gguf`` are
downloaded whole through the hub client, which says so in one line. A branch or tag revision (``main``) is pinned to
the commit it had at the first run; ``refresh`` (``attnstruct score --refresh``, ``sweep --refresh``) asks the hub
again (one model info request) and pins the commit the revision names now, as after weights were uploaded again into
the same branch (EleutherAI/pythia#107); naming a commit needs no pin.

What the hub answers is not trusted (docs/security.md): its commit id must be 40 hexadecimal digits, its file names
relative names inside the repository, the shards an index names files the repository lists; every cache path is
made by :func:`attnstruct.untrusted.inside`, and every request goes through
:mod:`attnstruct.hub_client.client`, whose bounds hold whatever the server does. What breaks a rule is refused
in one line (:class:`~attnstruct.checkpoints.extract.blocks.ExtractionError`), before anything is written or asked
for with it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote

from ..hub_client.client import counting, get_file, get_json
from ..hub_client.quota import CallCounter
from ..results import write_atomically
from ..untrusted import COMMIT, UnsafeName, commit_id, inside
from .extract.blocks import ExtractionError, hub_failures_as_extraction_errors
from .extract.hf import JsonConfig, family_of
from .extract.local_files import read_json_object
from .hub_manifest import Listing, listing, manifest_json, shard_names, stored_commit, stored_manifest, weights_digest
from .remote_safetensors import RangeReader, RemoteSafetensors
from .remote_tensors import RangeTensorSource
from .remote_torch_bin import RemoteTorchBin
from .torch_zip import NotAZipArchive

_NAME = r"[A-Za-z0-9][\w.-]*"
_REF_PART = r"[\w-][\w.-]*"  # a part of a ref name: no leading dot, no empty part, no control character
HUB_ID = re.compile(rf"(?P<repo>{_NAME}(?:/{_NAME})?)(?:@(?P<revision>{_REF_PART}(?:/{_REF_PART})*))?")
LOCAL_SUFFIXES = (".safetensors", ".gguf", ".onnx", ".bin", ".json", ".nc", ".csv")
TRUE = {"1", "on", "yes", "true"}
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".onnx", ".h5", ".msgpack")  # weights in any format, read or not
WEIGHT_BIN = re.compile(r"(?:.*/)?(?:pytorch_)?model[^/]*\.bin")  # torch's and CTranslate2's; not training_args.bin


def parse_hub_id(text: str) -> tuple[str, str]:
    """``"ORG/NAME@REV"`` -> ``("ORG/NAME", "REV")``; the revision defaults to ``main``. ValueError if malformed:
    the whole text must match (a trailing newline too), a revision is ``/``-separated parts of letters, digits, ``_``,
    ``-`` and ``.`` that do not start with ``.``, and no ``..`` anywhere."""
    match = HUB_ID.fullmatch(text) if isinstance(text, str) else None
    if not match or text.endswith(LOCAL_SUFFIXES) or ".." in text:
        raise ValueError(f"{text!r} is not a hub model id (ORG/NAME or ORG/NAME@REVISION)")
    return match["repo"], match["revision"] or "main"


def looks_like_hub_id(text: str) -> bool:
    """Whether ``text``, which is not an existing path, should be read as a hub id rather than a missing file."""
    try:
        parse_hub_id(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class HubSettings:
    """Where and how to reach the hub, read from the environment at call time; ``refresh``: ask the hub for the
    commit a branch or tag names now instead of the one pinned at the first run (module docstring)."""

    endpoint: str
    token: str | None
    hub_cache: Path
    range_cache: Path
    offline: bool
    refresh: bool = False

    @classmethod
    def from_env(cls, range_cache: str | os.PathLike | None = None, *, refresh: bool = False) -> HubSettings:
        from huggingface_hub import constants, get_token

        from ..cache_folder import cache_dir

        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE or constants.HF_HUB_OFFLINE
        return cls(
            endpoint=(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/"),
            token=os.environ.get("HF_TOKEN") or get_token(),
            hub_cache=Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE),
            range_cache=Path(range_cache) if range_cache else cache_dir() / "hub",
            offline=offline,
            refresh=refresh,
        )


@dataclass
class HubModel:
    """A resolved hub model: what to read (``source``) and what was learnt on the way.

    ``source`` is a local path (snapshot or downloaded file) or a range-read tensor source
    (:class:`RemoteSafetensors`, :class:`RemoteTorchBin`); ``kind`` is ``snapshot``, ``ranges`` or ``download``;
    ``bytes_fetched`` counts this run's network bytes of weights; ``weights_sha256`` is the digest of the weight files
    the hub states (:func:`~attnstruct.checkpoints.hub_manifest.weights_digest`), None when it states none or the
    model was read from a snapshot.
    """

    model_id: str
    repo: str
    revision: str
    commit: str
    kind: str
    source: object
    n_params: int | None = None
    extra: dict = field(default_factory=dict)
    weights_sha256: str | None = None
    calls: CallCounter = field(default_factory=CallCounter)  # this model's hub requests, by quota bucket

    @property
    def bytes_fetched(self) -> int:
        reader = getattr(self.source, "reader", None)
        return reader.bytes_fetched if reader is not None else int(self.extra.get("bytes_downloaded", 0))

    def close(self) -> None:
        if isinstance(self.source, RangeTensorSource):
            self.source.close()


def repo_folder(repo: str) -> str:
    """``ORG--NAME``, the folder of a repository ``ORG/NAME`` in a cache."""
    return repo.replace("/", "--")


def _complete_snapshot(settings: HubSettings, repo: str, revision: str) -> Path | None:
    """The cached snapshot folder of ``repo@revision`` in the hub cache if it holds config.json and every weight
    file (those of a shard index, or ``model.safetensors`` or ``pytorch_model.bin``). The cache is read as
    ``huggingface_hub`` lays it out (``models--ORG--NAME/refs/REV`` holds the commit, ``snapshots/COMMIT/`` the files,
    links into ``blobs/``), and checked: the commit must be one, and every file must lie inside the cache."""
    storage = f"models--{repo_folder(repo)}"
    if not (settings.hub_cache / storage / "snapshots").is_dir():
        return None  # nothing cached
    what = f"the hub cache's {repo}@{revision}"
    commit = revision
    if not COMMIT.fullmatch(revision):
        ref = inside(settings.hub_cache, storage, "refs", *revision.split("/"))
        if not ref.is_file():
            return None
        commit = stored_commit(ref, what)

    def cached(file: str) -> Path:
        return inside(settings.hub_cache, storage, "snapshots", commit, *file.split("/"))

    if not cached("config.json").is_file():
        return None
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if cached(index).is_file():
            shards = shard_names(cached(index).read_bytes(), f"{index} of {what}")
            return cached("") if all(cached(shard).is_file() for shard in shards) else None
    weights = ("model.safetensors", "pytorch_model.bin")
    return cached("") if any(cached(file).is_file() for file in weights) else None


def _manifest_paths(settings: HubSettings, repo: str, revision: str) -> tuple[Path, Path]:
    """The ref file of ``repo@revision`` (the commit it was pinned to) and the folder of ``repo``'s manifests."""
    ref = inside(settings.range_cache, repo_folder(repo), "refs", revision.replace("/", "--"))
    return ref, inside(settings.range_cache, repo_folder(repo), "manifests")


def _manifest(settings: HubSettings, repo: str, revision: str) -> Listing:
    """The :class:`~attnstruct.checkpoints.hub_manifest.Listing` of ``repo@revision``: from an earlier run's manifest
    (``sizes`` None in one written before sizes were kept, ``sha256`` None in one written before digests were),
    else one ``model_info`` request."""
    ref, manifests = _manifest_paths(settings, repo, revision)
    if ref.is_file():
        commit = stored_commit(ref, f"the pin of {repo}@{revision}")
        stored = inside(manifests, f"{commit}.json")
        if stored.is_file():
            return Listing(commit, *stored_manifest(stored))
    return _model_info(settings, repo, revision)


def _model_info(settings: HubSettings, repo: str, revision: str) -> Listing:
    """:func:`hub_listing`, kept as the manifest of its commit and as the pin of ``revision``."""
    if settings.offline:
        raise ExtractionError(f"{repo}@{revision} is not in the cache and HF_HUB_OFFLINE is set", "offline")
    found = hub_listing(settings, repo, revision)
    ref, manifests = _manifest_paths(settings, repo, revision)
    manifest = manifest_json(found)
    write_atomically(inside(manifests, f"{found.commit}.json"), lambda tmp: Path(tmp).write_text(manifest))
    write_atomically(ref, lambda tmp: Path(tmp).write_text(found.commit))
    return found


def pinned_listing(settings: HubSettings, repo: str, revision: str) -> Listing:
    """The :class:`~attnstruct.checkpoints.hub_manifest.Listing` of ``repo@revision`` that every reader of it shares:
    the commit pinned at the first run and its manifest (no request), else one model info request, kept as both."""
    return _manifest(settings, repo, revision)


def complete_snapshot(settings: HubSettings, repo: str, revision: str) -> Path | None:
    """The hub cache's snapshot folder of ``repo@revision`` when it holds config.json and every weight file."""
    return _complete_snapshot(settings, repo, revision)


def hub_listing(settings: HubSettings, repo: str, revision: str) -> Listing:
    """The :class:`~attnstruct.checkpoints.hub_manifest.Listing` of ``repo@revision``: one model info request (``GET
    /api/models/REPO/revision/REV?blobs=true``, as ``huggingface_hub.HfApi.model_info(files_metadata=True)`` sends
    it), checked (:func:`~attnstruct.checkpoints.hub_manifest.listing`). Nothing is kept."""
    url = f"{settings.endpoint}/api/models/{repo}/revision/{quote(revision, safe='')}?blobs=true"
    what = f"{repo}@{revision}"
    with hub_failures_as_extraction_errors():
        answer = get_json(url, token=settings.token, what=what)
    return listing(answer, f"the hub's answer for {what}")


def model_listing(settings: HubSettings, repo: str, revision: str) -> tuple[str, list[str], dict[str, int]]:
    """``(commit, files, sizes)`` of :func:`hub_listing`."""
    found = hub_listing(settings, repo, revision)
    return found.commit, found.files, found.sizes


def refresh_pin(settings: HubSettings, repo: str, revision: str) -> str:
    """The commit that ``revision`` of ``repo`` names now: the revision itself when it is a commit id (no request),
    else one model info request, whose answer becomes the manifest and the pin that later runs read."""
    return revision if COMMIT.fullmatch(revision) else _refreshed(settings, repo, revision).commit


def _refreshed(settings: HubSettings, repo: str, revision: str) -> Listing:
    if settings.offline:
        raise ExtractionError(f"refreshing {repo}@{revision} needs the hub, and HF_HUB_OFFLINE is set", "offline")
    return _model_info(settings, repo, revision)


def cached_file(settings: HubSettings, repo: str, commit: str, file: str) -> Path:
    """Where attnstruct's cache keeps ``file`` of ``repo`` at ``commit`` (downloaded whole)."""
    return inside(settings.range_cache, repo_folder(repo), "files", commit_id(commit), *file.split("/"))


def download(settings: HubSettings, repo: str, commit: str, file: str, sizes: dict[str, int] | None = None) -> Path:
    """One file of the repository into attnstruct's cache (``<range cache>/ORG--NAME/files/COMMIT/FILE``; no request
    when it is there already, with the size the hub lists), by :func:`attnstruct.hub_client.client.get_file`."""
    path = cached_file(settings, repo, commit, file)
    size = (sizes or {}).get(file)
    if path.is_file() and size in (None, path.stat().st_size):
        return path
    if settings.offline:
        raise ExtractionError(f"{repo}/{file} is not in the cache and HF_HUB_OFFLINE is set", "offline")
    url = f"{settings.endpoint}/{repo}/resolve/{commit}/{quote(file)}"
    with hub_failures_as_extraction_errors():
        return get_file(url, path, token=settings.token, what=f"{repo}/{file}", size=size)


def repo_config(settings: HubSettings, repo: str, commit: str, files: list[str], sizes=None) -> JsonConfig:
    """The commit's ``config.json`` (downloaded into attnstruct's cache), or the kind ``unsupported architecture``
    when ``files`` hold none."""
    if "config.json" not in files:
        raise ExtractionError(f"{repo} has no config.json", "unsupported architecture")
    return JsonConfig(**read_json_object(download(settings, repo, commit, "config.json", sizes)))


def _index_shards(settings: HubSettings, repo: str, commit: str, files: list[str], sizes, index: str) -> list[str]:
    """The shards a shard index names, each a file of the repository (:func:`~.hub_manifest.shard_names`)."""
    data = download(settings, repo, commit, index, sizes).read_bytes()
    return shard_names(data, f"{repo}/{index}", files)


def _safetensors_files(settings: HubSettings, repo: str, commit: str, files: list[str], sizes=None) -> list[str]:
    """The top-level shards: from the index when there is one, else every top-level ``.safetensors`` file."""
    if "model.safetensors.index.json" in files:
        return _index_shards(settings, repo, commit, files, sizes, "model.safetensors.index.json")
    return [f for f in files if f.endswith(".safetensors") and "/" not in f]


def _torch_bin_files(settings: HubSettings, repo: str, commit: str, files: list[str], sizes=None) -> list[str]:
    """``pytorch_model.bin``, or the shards the ``pytorch_model.bin.index.json`` names; none if neither is there."""
    if "pytorch_model.bin" in files:
        return ["pytorch_model.bin"]
    if "pytorch_model.bin.index.json" in files:
        return _index_shards(settings, repo, commit, files, sizes, "pytorch_model.bin.index.json")
    return []


def weight_files(settings: HubSettings, repo: str, commit: str, files: list[str], sizes=None) -> list[str]:
    """The weight files a reader of the whole model needs: the safetensors shards, else the ``pytorch_model.bin``
    shards (an index among ``files`` is downloaded to name them); the kind ``no weights`` when neither is there."""
    found = _safetensors_files(settings, repo, commit, files, sizes) or _torch_bin_files(
        settings, repo, commit, files, sizes
    )
    if not found:
        raise ExtractionError(f"{repo}@{commit[:12]} has no safetensors or pytorch_model.bin weights", "no weights")
    return found


def _range_reader(settings: HubSettings, repo: str, commit: str, sizes: dict[str, int] | None) -> RangeReader:
    return RangeReader(
        repo,
        commit,
        endpoint=settings.endpoint,
        token=settings.token,
        cache=settings.range_cache,
        offline=settings.offline,
        sizes=sizes,
    )


def _check_weights(files: list[str], repo: str, revision: str) -> None:
    """Refuse, with the kind ``no weights``, a revision that holds no weight file in any format."""
    if not any(f.endswith(WEIGHT_SUFFIXES) or WEIGHT_BIN.fullmatch(f) for f in files):
        shown = ", ".join(files[:5]) + (", ..." if len(files) > 5 else "") if files else "no file"
        raise ExtractionError(f"{repo}@{revision} holds no weight file (it holds {shown})", "no weights")


def _whole_files(files: list[str], repo: str) -> list[str]:
    """Files to download whole for a repository without safetensors weights."""
    if "pytorch_model.bin" in files:
        return ["pytorch_model.bin"]
    if "pytorch_model.bin.index.json" in files:
        return ["pytorch_model.bin.index.json"] + sorted(f for f in files if re.fullmatch(r"pytorch_model-.*\.bin", f))
    ggufs = [f for f in files if f.endswith(".gguf")]
    if len(ggufs) == 1:
        return ggufs
    if ggufs:
        raise ExtractionError(f"{repo} holds {len(ggufs)} GGUF files; download the one you want and score that file")
    raise ExtractionError(f"{repo} has no safetensors, pytorch_model.bin or GGUF weights", "unsupported architecture")


def open_hub_model(
    model_id: str, *, settings: HubSettings | None = None, workers: int = 4, refresh: bool = False
) -> HubModel:
    """Resolve ``model_id`` (``ORG/NAME[@REVISION]``) to something :func:`attnstruct.checkpoints.extract.iter_blocks` or
    :func:`attnstruct.checkpoints.extract.hf.hf_blocks` reads (module docstring); ``refresh`` as
    :attr:`HubSettings.refresh`. Raises ExtractionError with one line."""
    repo, revision = parse_hub_id(model_id)
    settings = settings or HubSettings.from_env()
    if refresh:
        settings = replace(settings, refresh=True)
    calls = CallCounter()
    try:
        with counting(calls):
            model = _open(model_id, repo, revision, settings, workers)
    except UnsafeName as err:
        raise ExtractionError(str(err)) from None
    model.calls = calls
    reader = getattr(model.source, "reader", None)
    if isinstance(reader, RangeReader):
        reader.calls = calls  # its reads from now on, in the prefetch threads too
    return model


def _open(model_id: str, repo: str, revision: str, settings: HubSettings, workers: int) -> HubModel:
    found = None
    if settings.refresh and not COMMIT.fullmatch(revision):
        found = _refreshed(settings, repo, revision)  # the commit the revision names now, pinned
    snapshot = _complete_snapshot(settings, repo, found.commit if found else revision)
    if snapshot is not None:
        return HubModel(model_id, repo, revision, snapshot.name, "snapshot", snapshot)
    commit, files, sizes, sha256 = found or _manifest(settings, repo, revision)
    _check_weights(files, repo, revision)
    if sha256 is None and not settings.offline:
        commit, files, sizes, sha256 = _model_info(settings, repo, commit)  # a manifest of a run that kept no digests
    shards = _safetensors_files(settings, repo, commit, files, sizes)
    torch_bins = [] if shards else _torch_bin_files(settings, repo, commit, files, sizes)
    if shards or torch_bins:
        config = repo_config(settings, repo, commit, files, sizes)
        family_of(config)  # an unsupported architecture fails here, before any weight byte is read
    if shards:
        reader = _range_reader(settings, repo, commit, sizes)
        source = RemoteSafetensors(reader, shards, config, sizes=sizes, workers=workers)
        digest = weights_digest(shards, sha256)
        return HubModel(model_id, repo, revision, commit, "ranges", source, source.n_params(), weights_sha256=digest)
    if torch_bins:
        if sizes is None or not all(file in sizes for file in torch_bins):
            _, _, sizes, sha256 = _model_info(settings, repo, commit)
        for file in torch_bins:
            if file not in sizes:
                raise ExtractionError(f"{repo}/{file} (no such file in the repository)", "not found")
        try:
            reader, description = _range_reader(settings, repo, commit, sizes), f"{repo}@{commit[:12]}"
            source = RemoteTorchBin(reader, torch_bins, config, sizes=sizes, description=description, workers=workers)
            digest = weights_digest(torch_bins, sha256)
            return HubModel(
                model_id, repo, revision, commit, "ranges", source, source.n_params(), weights_sha256=digest
            )
        except NotAZipArchive:
            pass  # the legacy format: downloaded whole below
    whole = _whole_files(files, repo)
    if not whole[0].endswith(".gguf"):
        repo_config(settings, repo, commit, files, sizes)
    missing = [f for f in whole if not cached_file(settings, repo, commit, f).is_file()]
    if missing:
        print(f"attnstruct: {repo} has no safetensors weights; downloading {', '.join(missing)} whole", file=sys.stderr)
    paths = [download(settings, repo, commit, f, sizes) for f in whole]
    size = sum(p.stat().st_size for p, f in zip(paths, whole) if f in missing)
    source = paths[0] if whole[0].endswith(".gguf") else paths[0].parent
    weights = [f for f in whole if not f.endswith(".json")]
    return HubModel(
        model_id,
        repo,
        revision,
        commit,
        "download",
        source,
        extra={"bytes_downloaded": size},
        weights_sha256=weights_digest(weights, sha256),
    )
