"""Models named by hub id, ``ORG/NAME[@REVISION]``: resolved through ``huggingface_hub``, query/key bytes only.

The environment is read at call time, so ``HF_ENDPOINT``, ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and ``HF_TOKEN``
behave as with any hub client. For a model, in this order:

1. a complete snapshot of that revision in the hub cache (``huggingface-cli download`` made one): read locally;
2. a manifest of an earlier run in attnstruct's range cache (the revision's commit, files and sizes): no request;
3. otherwise one ``model_info(files_metadata=True)`` request gives the commit, the file list and each file's
   size, kept as that manifest (a manifest of an older run without sizes is refreshed when a size is needed).

Then ``config.json`` (and the shard index) come through ``hf_hub_download`` into the hub cache, and only the
query/key tensors come by Range request, with what locates them: each safetensors shard's header
(:mod:`attnstruct.checkpoints.remote_safetensors`), or each ``pytorch_model.bin`` shard's ZIP directory and
pickled tensor metadata (:mod:`attnstruct.checkpoints.remote_torch_bin`; the pickle is never run). Whole shards
are never downloaded. A legacy ``pytorch_model.bin`` (torch before 1.6, not a ZIP archive) and a repository with
only one ``.gguf`` are downloaded whole through the hub client, which says so in one line. A branch revision
(``main``) is pinned to the commit it had at the first run; name a commit to move on.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..results import write_atomically
from .extract.blocks import ExtractionError
from .extract.hf import JsonConfig, family_of
from .hub_client import REQUEST_TIMEOUT_S, call_with_retries, hub_error
from .remote_safetensors import RangeReader, RemoteSafetensors
from .remote_tensors import RangeTensorSource
from .remote_torch_bin import RemoteTorchBin
from .torch_zip import NotAZipArchive

HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*(?:/[A-Za-z0-9][\w.-]*)?)(?:@(?P<revision>[\w./-]+))?$")
LOCAL_SUFFIXES = (".safetensors", ".gguf", ".onnx", ".bin", ".json", ".nc", ".csv")
TRUE = {"1", "on", "yes", "true"}


def parse_hub_id(text: str) -> tuple[str, str]:
    """``"ORG/NAME@REV"`` -> ``("ORG/NAME", "REV")``; the revision defaults to ``main``. ValueError if malformed."""
    match = HUB_ID.match(text)
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
    """Where and how to reach the hub, read from the environment at call time."""

    endpoint: str
    token: str | None
    hub_cache: Path
    range_cache: Path
    offline: bool

    @classmethod
    def from_env(cls, range_cache: str | os.PathLike | None = None) -> HubSettings:
        from huggingface_hub import constants, get_token

        from .zoo import cache_dir

        offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE or constants.HF_HUB_OFFLINE
        return cls(
            endpoint=(os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/"),
            token=os.environ.get("HF_TOKEN") or get_token(),
            hub_cache=Path(os.environ.get("HF_HUB_CACHE") or constants.HF_HUB_CACHE),
            range_cache=Path(range_cache) if range_cache else cache_dir() / "hub",
            offline=offline,
        )


@dataclass
class HubModel:
    """A resolved hub model: what to read (``source``) and what was learnt on the way.

    ``source`` is a local path (snapshot or downloaded file) or a range-read tensor source
    (:class:`RemoteSafetensors`, :class:`RemoteTorchBin`); ``kind`` is ``snapshot``, ``ranges`` or ``download``;
    ``bytes_fetched`` counts this run's network bytes of weights.
    """

    model_id: str
    repo: str
    revision: str
    commit: str
    kind: str
    source: object
    n_params: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def bytes_fetched(self) -> int:
        reader = getattr(self.source, "reader", None)
        return reader.bytes_fetched if reader is not None else int(self.extra.get("bytes_downloaded", 0))

    def close(self) -> None:
        if isinstance(self.source, RangeTensorSource):
            self.source.close()


def _complete_snapshot(settings: HubSettings, repo: str, revision: str) -> Path | None:
    """The cached snapshot folder of ``repo@revision`` if it holds config.json and every weight file."""
    from huggingface_hub import snapshot_download

    if not (settings.hub_cache / f"models--{repo.replace('/', '--')}" / "snapshots").is_dir():
        return None  # nothing cached: skip the hub client's slower miss
    try:
        folder = Path(snapshot_download(repo, revision=revision, cache_dir=settings.hub_cache, local_files_only=True))
    except Exception:
        return None
    if not (folder / "config.json").is_file():
        return None
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (folder / index).is_file():
            shards = set(json.loads((folder / index).read_text())["weight_map"].values())
            return folder if all((folder / s).is_file() for s in shards) else None
    return folder if (folder / "model.safetensors").is_file() or (folder / "pytorch_model.bin").is_file() else None


def _manifest_paths(settings: HubSettings, repo: str, revision: str) -> tuple[Path, Path]:
    folder = settings.range_cache / repo.replace("/", "--")
    return folder / "refs" / revision.replace("/", "--"), folder / "manifests"


def _manifest(settings: HubSettings, repo: str, revision: str) -> tuple[str, list[str], dict[str, int] | None]:
    """``(commit, files, sizes)`` of ``repo@revision``: from an earlier run's manifest (``sizes`` None in one
    written before sizes were kept), else one ``model_info`` request."""
    ref, manifests = _manifest_paths(settings, repo, revision)
    if ref.is_file():
        commit = ref.read_text().strip()
        stored = manifests / f"{commit}.json"
        if stored.is_file():
            manifest = json.loads(stored.read_text())
            return commit, manifest["files"], manifest.get("sizes")
    return _model_info(settings, repo, revision)


def _model_info(settings: HubSettings, repo: str, revision: str) -> tuple[str, list[str], dict[str, int]]:
    """One ``model_info(files_metadata=True)`` request, kept as the manifest of its commit (and of ``revision``)."""
    if settings.offline:
        raise ExtractionError(f"{repo}@{revision} is not in the cache and HF_HUB_OFFLINE is set", "offline")
    from huggingface_hub import HfApi

    api = HfApi(endpoint=settings.endpoint, token=settings.token)
    try:
        info = call_with_retries(
            lambda: api.model_info(repo, revision=revision, files_metadata=True, timeout=REQUEST_TIMEOUT_S),
            what=f"{repo}@{revision}",
        )
    except ExtractionError:
        raise
    except Exception as err:
        raise hub_error(err, f"{repo}@{revision}") from None
    siblings = info.siblings or []
    files = sorted(s.rfilename for s in siblings)
    sizes = {s.rfilename: s.lfs.size if s.lfs is not None else s.size for s in siblings}
    sizes = {file: size for file, size in sizes.items() if size is not None}
    ref, manifests = _manifest_paths(settings, repo, revision)
    manifest = json.dumps({"files": files, "sizes": sizes})
    write_atomically(manifests / f"{info.sha}.json", lambda tmp: Path(tmp).write_text(manifest))
    write_atomically(ref, lambda tmp: Path(tmp).write_text(info.sha))
    return info.sha, files, sizes


def _is_cached(settings: HubSettings, repo: str, commit: str, file: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo, file, cache_dir=settings.hub_cache, revision=commit), str)


def _download(settings: HubSettings, repo: str, commit: str, file: str) -> Path:
    """One file into the hub cache (no request when it is there already), retried on a rate limit or a transient
    failure (:func:`attnstruct.checkpoints.hub_client.call_with_retries`)."""
    from huggingface_hub import hf_hub_download

    def download() -> str:
        return hf_hub_download(
            repo,
            file,
            revision=commit,
            cache_dir=settings.hub_cache,
            endpoint=settings.endpoint,
            token=settings.token,
            local_files_only=settings.offline,
        )

    try:
        return Path(download() if settings.offline else call_with_retries(download, what=f"{repo}/{file}"))
    except ExtractionError:
        raise
    except Exception as err:
        if settings.offline:
            raise ExtractionError(f"{repo}/{file} is not in the cache and HF_HUB_OFFLINE is set", "offline") from None
        raise hub_error(err, f"{repo}/{file}") from None


def _config(settings: HubSettings, repo: str, commit: str, files: list[str]) -> JsonConfig:
    if "config.json" not in files:
        raise ExtractionError(f"{repo} has no config.json", "unsupported architecture")
    try:
        return JsonConfig(**json.loads(_download(settings, repo, commit, "config.json").read_text()))
    except (json.JSONDecodeError, TypeError) as err:
        raise ExtractionError(f"{repo}: unreadable config.json ({err})") from None


def _safetensors_files(settings: HubSettings, repo: str, commit: str, files: list[str]) -> list[str]:
    """The top-level shards: from the index when there is one, else every top-level ``.safetensors`` file."""
    if "model.safetensors.index.json" in files:
        index = json.loads(_download(settings, repo, commit, "model.safetensors.index.json").read_text())
        return sorted(set(index["weight_map"].values()))
    return [f for f in files if f.endswith(".safetensors") and "/" not in f]


def _torch_bin_files(settings: HubSettings, repo: str, commit: str, files: list[str]) -> list[str]:
    """``pytorch_model.bin``, or the shards the ``pytorch_model.bin.index.json`` names; none if neither is there."""
    if "pytorch_model.bin" in files:
        return ["pytorch_model.bin"]
    if "pytorch_model.bin.index.json" in files:
        index = json.loads(_download(settings, repo, commit, "pytorch_model.bin.index.json").read_text())
        return sorted(set(index["weight_map"].values()))
    return []


def _range_reader(settings: HubSettings, repo: str, commit: str) -> RangeReader:
    return RangeReader(
        repo,
        commit,
        endpoint=settings.endpoint,
        token=settings.token,
        cache=settings.range_cache,
        offline=settings.offline,
    )


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


def open_hub_model(model_id: str, *, settings: HubSettings | None = None, workers: int = 4) -> HubModel:
    """Resolve ``model_id`` (``ORG/NAME[@REVISION]``) to something :func:`attnstruct.checkpoints.extract.iter_blocks` or
    :func:`attnstruct.checkpoints.extract.hf.hf_blocks` reads (module docstring). Raises ExtractionError with one
    line."""
    repo, revision = parse_hub_id(model_id)
    settings = settings or HubSettings.from_env()
    snapshot = _complete_snapshot(settings, repo, revision)
    if snapshot is not None:
        return HubModel(model_id, repo, revision, snapshot.name, "snapshot", snapshot)
    commit, files, sizes = _manifest(settings, repo, revision)
    shards = _safetensors_files(settings, repo, commit, files)
    torch_bins = [] if shards else _torch_bin_files(settings, repo, commit, files)
    if shards or torch_bins:
        config = _config(settings, repo, commit, files)
        family_of(config)  # an unsupported architecture fails here, before any weight byte is read
    if shards:
        source = RemoteSafetensors(_range_reader(settings, repo, commit), shards, config, workers=workers)
        return HubModel(model_id, repo, revision, commit, "ranges", source, n_params=source.n_params())
    if torch_bins:
        if sizes is None or not all(file in sizes for file in torch_bins):
            _, _, sizes = _model_info(settings, repo, commit)
        for file in torch_bins:
            if file not in sizes:
                raise ExtractionError(f"{repo}/{file} (no such file in the repository)", "not found")
        try:
            reader, description = _range_reader(settings, repo, commit), f"{repo}@{commit[:12]}"
            source = RemoteTorchBin(reader, torch_bins, config, sizes=sizes, description=description, workers=workers)
            return HubModel(model_id, repo, revision, commit, "ranges", source, n_params=source.n_params())
        except NotAZipArchive:
            pass  # the legacy format: downloaded whole below
    whole = _whole_files(files, repo)
    if not whole[0].endswith(".gguf"):
        _config(settings, repo, commit, files)
    missing = [f for f in whole if not _is_cached(settings, repo, commit, f)]
    if missing:
        print(f"attnstruct: {repo} has no safetensors weights; downloading {', '.join(missing)} whole", file=sys.stderr)
    paths = [_download(settings, repo, commit, f) for f in whole]
    size = sum(p.stat().st_size for p, f in zip(paths, whole) if f in missing)
    source = paths[0] if whole[0].endswith(".gguf") else paths[0].parent
    return HubModel(model_id, repo, revision, commit, "download", source, extra={"bytes_downloaded": size})
