"""``pytorch_model.bin`` read by byte ranges: the ZIP layout and the restricted unpickler, on disk and through the
stand-in hub: the same scores as the whole model, only the query/key bytes, nothing of a hostile pickle run."""

import dataclasses
import io
import json
import os
import pickle
import re
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from extract_models import H

from attnstruct import cli
from attnstruct.checkpoints.extract import ExtractionError, count_parameters, hf
from attnstruct.checkpoints.hub import open_hub_model
from attnstruct.checkpoints.local_reader import LocalFileReader
from attnstruct.checkpoints.remote_tensors import RangeTensorSource, TensorLocation
from attnstruct.checkpoints.remote_torch_bin import RemoteTorchBin
from attnstruct.checkpoints.scoring import score_model
from attnstruct.checkpoints.torch_zip import NotAZipArchive, local_header_length, torch_zip_index

from conftest import tiny

hub_test = pytest.mark.hub
SYSTEM = f"{os.system.__module__}.system"  # posix.system
WIDE = {"vocab_size": 6000, "intermediate_size": 512}
FUSED_D_MODEL = 128  # fused QKV weights that outweigh the index reads


def save_bin(state: dict, path: Path, **kw) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path, **kw)


def bin_folder(model, folder: Path, *, shard_size: str | None = None, legacy: bool = False) -> Path:
    """``model`` as an older repository holds it: ``pytorch_model.bin`` (or ``pytorch_model-k-of-n.bin`` shards
    with ``pytorch_model.bin.index.json``), the tensors and names of what ``save_pretrained`` writes."""
    from safetensors.torch import load_file

    model.save_pretrained(folder, **({"max_shard_size": shard_size} if shard_size else {}))
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        renamed = {
            f: f.replace("model-", "pytorch_model-").replace(".safetensors", ".bin") for f in weight_map.values()
        }
        for shard, name in renamed.items():
            save_bin(load_file(folder / shard), folder / name)
            (folder / shard).unlink()
        weight_map = {tensor: renamed[shard] for tensor, shard in weight_map.items()}
        (folder / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
        index.unlink()
    else:
        legacy_kw = {"_use_new_zipfile_serialization": False} if legacy else {}
        save_bin(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin", **legacy_kw)
        (folder / "model.safetensors").unlink()
    return folder


BIN_REPOS = {
    "tiny-bin/bert": ("bert", {}, {}),
    "tiny-bin/llama-gqa-sharded": ("llama", {}, {"shard_size": "20KB"}),
    "tiny-bin/gpt-neox": ("gpt_neox", {"hidden_size": FUSED_D_MODEL}, {}),
    "tiny-bin/modernbert": ("modernbert", {"hidden_size": FUSED_D_MODEL}, {}),
    "tiny-bin/wide-vocab": ("bert", WIDE, {}),
    "tiny-bin/legacy": ("bert", {}, {"legacy": True}),
}


@pytest.fixture(scope="module")
def bin_repos(tmp_path_factory):
    """``{repo: (folder with .bin, folder with the same model's safetensors)}``."""
    root = tmp_path_factory.mktemp("bin-repos")
    folders = {}
    for repo, (name, overrides, how) in BIN_REPOS.items():
        stem = repo.replace("/", "--")
        tiny(name, **overrides).save_pretrained(root / f"{stem}-safetensors")
        folders[repo] = (bin_folder(tiny(name, **overrides), root / stem, **how), root / f"{stem}-safetensors")
    return folders


@pytest.fixture
def bin_hub(hub, bin_repos):
    for repo, (folder, _) in bin_repos.items():
        hub.add_folder(repo, folder)
    return hub


def weight_gets(hub, suffix: str = ".bin") -> list[tuple[int, int]]:
    """``[start, end)`` of every ranged GET of a weight file the hub answered."""
    found = []
    for method, path, header in hub.requests:
        if method == "GET" and path.endswith(suffix) and header:
            start, end = re.fullmatch(r"bytes=(\d+)-(\d+)", header).groups()
            found.append((int(start), int(end) + 1))
    return found


def reading(data: bytes):
    """``read(start, end)`` over bytes in memory."""
    return lambda start, end: data[start:end]


def data_start(path: Path, name: str) -> int:
    """Where the bytes of tensor ``name``'s storage start in the ``.bin`` at ``path``."""
    data = path.read_bytes()
    member = torch_zip_index(reading(data), len(data), path.name)[name].member
    return member.header_offset + local_header_length(data[member.header_offset :], member.name)


# -- the ZIP layout and the views, on disk -----------------------------------------------------------------------


def test_views_transposes_and_dtypes_are_rebuilt_from_their_own_bytes(tmp_path):
    big = torch.randn(64, 32)
    state = {
        "big": big,
        "rows": big[10:12],
        "columns": big[:, 3:5],
        "transposed": torch.randn(5, 7).t(),
        "every_other": big[::2, ::4],
        "half": torch.randn(3, 4, dtype=torch.float16),
        "bf16": torch.randn(6, dtype=torch.bfloat16),
        "ids": torch.arange(9).view(3, 3),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.empty(0, 4),
        "parameter": torch.nn.Parameter(torch.randn(2, 3)),  # pickled through torch._utils._rebuild_parameter
    }
    save_bin(state, tmp_path / "pytorch_model.bin")
    reader = LocalFileReader(tmp_path)
    size = reader.size("pytorch_model.bin")
    source = RemoteTorchBin(reader, ["pytorch_model.bin"], None, sizes={"pytorch_model.bin": size}, description="t")
    for name, tensor in state.items():
        got = source.get(name)
        assert got.dtype == tensor.dtype and got.shape == tensor.shape and torch.equal(got, tensor.detach()), name
    before = reader.bytes_fetched
    source.get("rows")  # 2 of big's 64 rows: their bytes and the storage's local header, not the storage
    assert reader.bytes_fetched - before < 2 * 32 * 4 + 200 < big.numel() * 4


def test_the_index_records_each_view_as_torch_load_sees_it(tmp_path):
    base = torch.randn(8, 6)
    state = {"base": base, "view": base[2:, 1:4], "t": base.t(), "own": torch.randn(3)}
    save_bin(state, tmp_path / "x.bin")
    data = (tmp_path / "x.bin").read_bytes()
    index = torch_zip_index(reading(data), len(data), "x.bin")
    loaded = torch.load(tmp_path / "x.bin", weights_only=True)
    for name, tensor in loaded.items():
        assert (index[name].storage_offset, index[name].shape, index[name].stride) == (
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
        )
    assert index["base"].member == index["view"].member == index["t"].member != index["own"].member
    assert all(re.fullmatch(r"[^/]+/data/\d+", t.member.name) for t in index.values())


class CountingReader(LocalFileReader):
    def __init__(self, folder):
        super().__init__(folder)
        self.reads: list[tuple[int, int]] = []

    def read(self, file, start, end):
        self.reads.append((start, end))
        return super().read(file, start, end)


@pytest.mark.parametrize("merge_gap", [512, 4096])
def test_rows_are_read_alone_and_touching_rows_in_one_request(tmp_path, monkeypatch, merge_gap):
    """Rows 16-32 (1 KB) lie between the rows asked for: read in vain when a request costs more (a gap of 4 KB),
    left out when it costs less (512 B)."""
    from attnstruct.checkpoints import remote_tensors

    monkeypatch.setattr(remote_tensors, "MERGE_GAP", merge_gap)
    fused = torch.randn(48, 16)
    save_bin({"qkv.weight": fused, "other": torch.randn(4)}, tmp_path / "pytorch_model.bin")
    reader = CountingReader(tmp_path)
    size = reader.size("pytorch_model.bin")
    source = RemoteTorchBin(reader, ["pytorch_model.bin"], None, sizes={"pytorch_model.bin": size}, description="t")
    reader.reads.clear()
    got = source.get_rows("qkv.weight", [(8, 16), (0, 8), (32, 40)])
    assert torch.equal(got[:16], fused[:16]) and torch.equal(got[32:40], fused[32:40])
    assert not got[16:32].any() and not got[40:].any()
    if merge_gap == 512:
        assert len(reader.reads) == 2  # rows 0-16 (from the local header on), then rows 32-40
        assert sum(end - start for start, end in reader.reads) < 24 * 16 * 4 + 200 < fused.numel() * 4
    else:
        assert len(reader.reads) == 1  # rows 0-40 from the local header on, its length guessed
        assert sum(end - start for start, end in reader.reads) < 40 * 16 * 4 + 200 < fused.numel() * 4


def rezip(data: bytes, *, compression=zipfile.ZIP_STORED, replace: dict | None = None) -> bytes:
    """The members of the ZIP ``data`` written again by Python's zipfile, some replaced."""
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as target:
        for info in source.infolist():
            name = info.filename
            target.writestr(name, (replace or {}).get(name.rsplit("/", 1)[-1], source.read(name)))
    return out.getvalue()


@pytest.mark.parametrize("zip64", [False, True])
def test_an_archive_of_another_zip_writer_is_read_zip64_too(tmp_path, monkeypatch, zip64):
    """Python's zipfile pads nothing (the local headers are shorter than torch's) and, past its limits, writes
    ZIP64 fields in the local headers, the central directory and the end records: torch's alignment rule does not
    give its local headers' lengths."""
    state = {"a": torch.randn(5, 3), "b": torch.randn(4).to(torch.bfloat16), "c": torch.arange(6)}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    if zip64:
        monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 16)  # every size and offset past it
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 2)
    data = rezip(buffer.getvalue())
    zip64_records = struct.pack("<I", 0x06064B50) in data and struct.pack("<I", 0x07064B50) in data
    assert zip64_records == zip64
    index = torch_zip_index(reading(data), len(data), "other.bin")
    headers = [local_header_length(data[t.member.header_offset :], t.member.name) for t in index.values()]
    assert headers != [t.header_guess for t in index.values()]  # not torch's alignment: the guesses are wrong
    (tmp_path / "pytorch_model.bin").write_bytes(data)
    reader = LocalFileReader(tmp_path)
    source = RemoteTorchBin(
        reader, ["pytorch_model.bin"], None, sizes={"pytorch_model.bin": len(data)}, description="t"
    )
    for name, tensor in state.items():
        assert torch.equal(source.get(name), tensor), name


def test_a_header_longer_than_guessed_costs_one_more_read_of_the_missing_bytes(tmp_path):
    weight = torch.randn(16, 8)
    save_bin({"w": weight}, tmp_path / "pytorch_model.bin")
    reader = CountingReader(tmp_path)
    sizes = {"pytorch_model.bin": reader.size("pytorch_model.bin")}
    exact = RemoteTorchBin(reader, ["pytorch_model.bin"], None, sizes=sizes, description="t")
    short = dataclasses.replace(exact.location("w"), header_guess=exact.location("w").header_min)
    source = RangeTensorSource(reader, {"w": short}, None, description="t", header_length=local_header_length)
    reader.reads.clear()
    assert torch.equal(source.get("w"), weight)
    first, second = reader.reads
    assert first[0] == short.header_start and second == (
        first[1],
        first[1] + exact.location("w").header_guess - short.header_min,
    )
    reader.reads.clear()
    assert torch.equal(exact.get("w"), weight) and len(reader.reads) == 1


def test_compressed_big_endian_truncated_and_legacy_files_are_told_apart(tmp_path):
    buffer = io.BytesIO()
    torch.save({"a": torch.randn(3)}, buffer)
    compressed = rezip(buffer.getvalue(), compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(ExtractionError, match="compressed") as excinfo:
        torch_zip_index(reading(compressed), len(compressed), "c.bin")
    assert excinfo.value.kind == "unsupported architecture"
    big_endian = rezip(buffer.getvalue(), replace={"byteorder": b"big"})
    with pytest.raises(ExtractionError, match="big-endian"):
        torch_zip_index(reading(big_endian), len(big_endian), "b.bin")
    legacy = io.BytesIO()
    torch.save({"a": torch.randn(3)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(NotAZipArchive, match="not a ZIP archive"):
        torch_zip_index(reading(legacy.getvalue()), len(legacy.getvalue()), "l.bin")
    cut = buffer.getvalue()[: len(buffer.getvalue()) // 2]
    with pytest.raises(ExtractionError, match="truncated") as excinfo:
        torch_zip_index(reading(cut), len(cut), "cut.bin")
    assert not isinstance(excinfo.value, NotAZipArchive)


# -- hostile pickles -----------------------------------------------------------------------------------------------


def write_marker(path):
    Path(path).write_text("the pickle ran")


class Payload:
    """Pickles as a call of ``call(argument)``: what a hostile ``data.pkl`` does."""

    def __init__(self, call, argument):
        self.call, self.argument = call, argument

    def __reduce__(self):
        return self.call, (self.argument,)


def hostile_bin(payload) -> bytes:
    """A ``torch.save``-shaped ZIP archive whose ``data.pkl`` runs ``payload`` when unpickled."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps({"encoder.weight": payload}, protocol=2))
        archive.writestr("archive/byteorder", b"little")
        archive.writestr("archive/version", b"3\n")
    return out.getvalue()


def hostile_payloads(marker: Path) -> dict[str, Payload]:
    return {
        SYSTEM: Payload(os.system, f"touch {marker}"),
        f"{__name__}.write_marker": Payload(write_marker, str(marker)),
    }


@pytest.mark.parametrize("call", [SYSTEM, f"{__name__}.write_marker"])
def test_a_pickle_calling_anything_but_the_tensor_rebuilders_is_refused_before_it_runs(tmp_path, call):
    proof = tmp_path / "proof"
    pickle.loads(pickle.dumps(hostile_payloads(proof)[call]))  # unrestricted, the payload does run
    assert proof.exists()
    marker = tmp_path / "marker"
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(tiny("bert").config.to_json_string())
    (folder / "pytorch_model.bin").write_bytes(hostile_bin(hostile_payloads(marker)[call]))
    with pytest.raises(ExtractionError) as excinfo:
        hf.TorchBinSource(folder)
    message = str(excinfo.value)
    assert f"refuses to unpickle {call} (only tensors and plain containers are allowed)" in message
    assert "\n" not in message and not marker.exists()


def test_a_persistent_id_that_is_not_a_storage_is_refused(tmp_path):
    class Tagging(pickle.Pickler):
        def persistent_id(self, obj):
            return ("module", "os") if obj == "tagged" else None

    pickled = io.BytesIO()
    Tagging(pickled, protocol=2).dump({"w": "tagged"})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("archive/data.pkl", pickled.getvalue())
    data = out.getvalue()
    with pytest.raises(ExtractionError, match="refuses the persistent id 'module'"):
        torch_zip_index(reading(data), len(data), "p.bin")


@hub_test
def test_a_hostile_pickle_on_the_hub_is_one_line_exit_2_and_never_runs(hub, tmp_path, capsys):
    marker = tmp_path / "marker"
    config = tiny("bert").config.to_json_string().encode()
    hub.add_repo(
        "evil/bin", {"config.json": config, "pytorch_model.bin": hostile_bin(hostile_payloads(marker)[SYSTEM])}
    )
    assert cli.main(["score", "evil/bin"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"refuses to unpickle {SYSTEM}" in err and "evil/bin" in err and "\n" not in err
    with pytest.raises(ExtractionError, match=f"refuses to unpickle {SYSTEM}"):
        score_model("evil/bin")
    assert not marker.exists()


# -- through the stand-in hub --------------------------------------------------------------------------------------


@hub_test
@pytest.mark.parametrize(
    "repo", ["tiny-bin/bert", "tiny-bin/llama-gqa-sharded", "tiny-bin/gpt-neox", "tiny-bin/modernbert"]
)
def test_scores_by_range_equal_the_scores_of_the_whole_model(bin_hub, bin_repos, repo):
    folder, safetensors = bin_repos[repo]
    model = open_hub_model(repo)
    try:
        assert model.kind == "ranges"
        assert model.n_params == count_parameters(safetensors)
    finally:
        model.close()
    by_range = score_model(repo, per_head=True)
    assert by_range.equals(score_model(safetensors, per_head=True))
    assert by_range.equals(score_model(folder, per_head=True))


@hub_test
def test_a_sharded_bin_repository_is_read_from_every_shard(bin_hub, bin_repos):
    folder, _ = bin_repos["tiny-bin/llama-gqa-sharded"]
    shards = set(json.loads((folder / "pytorch_model.bin.index.json").read_text())["weight_map"].values())
    assert len(shards) > 1
    score_model("tiny-bin/llama-gqa-sharded")
    asked = {path.rsplit("/", 1)[-1] for method, path, _ in bin_hub.requests if method == "GET" and "/resolve/" in path}
    assert shards <= asked


@hub_test
def test_only_a_small_fraction_of_a_wide_vocabulary_bin_is_transferred(bin_hub, bin_repos, byte_exact_reads):
    folder, _ = bin_repos["tiny-bin/wide-vocab"]
    size = (folder / "pytorch_model.bin").stat().st_size
    score_model("tiny-bin/wide-vocab")
    served = bin_hub.bytes_served_for("tiny-bin/wide-vocab")
    assert served < 0.05 * size, f"{served} of {size} bytes"
    local = hf.TorchBinSource(folder)
    blocks = list(hf.hf_blocks(local))
    assert len(blocks) == 2 and local.reader.bytes_fetched < 0.05 * size, f"{local.reader.bytes_fetched} of {size}"


@hub_test
@pytest.mark.parametrize("repo", ["tiny-bin/gpt-neox", "tiny-bin/modernbert"])
def test_fused_qkv_value_rows_are_never_transferred_when_requests_cost_nothing(
    bin_hub, bin_repos, repo, byte_exact_reads
):
    folder, _ = bin_repos[repo]
    path = folder / "pytorch_model.bin"
    state = torch.load(path, weights_only=True)
    fused = {name: t for name, t in state.items() if re.search(r"(query_key_value|Wqkv)\.weight$", name)}
    assert fused
    d_head = FUSED_D_MODEL // H
    values = []  # [start, end) in the file of every value row
    for name, weight in fused.items():
        start, row = data_start(path, name), weight.shape[1] * weight.element_size()
        if "query_key_value" in name:  # per head h: rows [q_h | k_h | v_h], d_head each
            values += [(start + (3 * h + 2) * d_head * row, start + (3 * h + 3) * d_head * row) for h in range(H)]
        else:  # [q | k | v]
            values.append((start + 2 * FUSED_D_MODEL * row, start + 3 * FUSED_D_MODEL * row))
    score_model(repo)
    gets = weight_gets(bin_hub)
    assert gets and not [(g, v) for g in gets for v in values if g[0] < v[1] and v[0] < g[1]]
    whole = sum(t.numel() * t.element_size() for t in fused.values())
    assert bin_hub.bytes_served_for(repo) < whole


@hub_test
@pytest.mark.parametrize("value_rows_cost_less", [True, False])
def test_a_fused_per_head_qkv_weight_is_read_in_one_request_when_its_value_rows_cost_less_than_requests(
    bin_hub, bin_repos, monkeypatch, value_rows_cost_less
):
    """The cost model of merging (remote_tensors.MERGE_GAP): the value rows between one head's key rows and the next
    head's query rows are read when they cost less than the request they save, else each head is a request."""
    from attnstruct.checkpoints import remote_tensors

    folder, _ = bin_repos["tiny-bin/gpt-neox"]
    path = folder / "pytorch_model.bin"
    fused = {n: t for n, t in torch.load(path, weights_only=True).items() if n.endswith("query_key_value.weight")}
    d_head = FUSED_D_MODEL // H
    value_bytes = d_head * FUSED_D_MODEL * next(iter(fused.values())).element_size()
    monkeypatch.setattr(remote_tensors, "MERGE_GAP", value_bytes if value_rows_cost_less else value_bytes - 1)
    score_model("tiny-bin/gpt-neox")
    gets = weight_gets(bin_hub)
    for name, weight in fused.items():
        start = data_start(path, name)
        end = start + weight.numel() * weight.element_size()
        touching = [g for g in gets if g[0] < end and start < g[1]]
        assert len(touching) == (1 if value_rows_cost_less else H), (name, touching)


@hub_test
def test_the_index_costs_two_requests_and_each_layer_one(bin_hub, byte_exact_reads):
    score_model("tiny-bin/bert")  # 2 layers; a layer's query/key weights and biases are four members side by side
    gets = weight_gets(bin_hub)
    assert len(gets) == 2 + 2, gets  # the tail with the directory, data.pkl; then one range per layer


@hub_test
def test_a_second_run_makes_no_request(bin_hub):
    first = score_model("tiny-bin/llama-gqa-sharded", per_head=True)
    assert bin_hub.bytes_served_for("tiny-bin/llama-gqa-sharded") > 0
    bin_hub.reset_counters()
    second = score_model("tiny-bin/llama-gqa-sharded", per_head=True)
    assert second.equals(first) and bin_hub.requests == [] and bin_hub.bytes_served == 0


@hub_test
def test_a_legacy_bin_is_downloaded_whole_with_the_notice(bin_hub, bin_repos, capsys):
    folder, safetensors = bin_repos["tiny-bin/legacy"]
    table = score_model("tiny-bin/legacy", per_head=True)
    assert "has no safetensors weights; downloading pytorch_model.bin whole" in capsys.readouterr().err
    assert table.equals(score_model(safetensors, per_head=True))
    assert table.equals(score_model(folder, per_head=True))  # locally: torch.load(weights_only=True)


@hub_test
def test_a_manifest_without_sizes_is_refreshed_once(bin_hub, tmp_path):
    score_model("tiny-bin/bert")
    manifests = list((tmp_path / "attnstruct-cache").rglob("tiny-bin--bert/manifests/*.json"))
    assert len(manifests) == 1 and "pytorch_model.bin" in json.loads(manifests[0].read_text())["sizes"]
    manifests[0].write_text(json.dumps({"files": json.loads(manifests[0].read_text())["files"]}))
    bin_hub.reset_counters()
    score_model("tiny-bin/bert")
    infos = [path for method, path, _ in bin_hub.requests if "/api/models/" in path]
    assert len(infos) == 1 and "blobs=true" in infos[0].lower()
    assert "sizes" in json.loads(manifests[0].read_text())
    bin_hub.reset_counters()
    score_model("tiny-bin/bert")
    assert bin_hub.requests == []


def test_parameters_of_tied_weights_are_counted_once_from_the_index(tmp_path):
    model = tiny("gpt2")  # its output head is the token embedding: one storage under two names
    state = model.state_dict()
    assert state["lm_head.weight"].data_ptr() == state["transformer.wte.weight"].data_ptr()
    save_bin(state, tmp_path / "pytorch_model.bin")
    model.config.save_pretrained(tmp_path)
    source = hf.TorchBinSource(tmp_path)
    assert source.n_params() == model.num_parameters() == count_parameters(tmp_path)


# -- archives and views that are not what they claim ----------------------------------------------------------------


def test_a_zip_member_named_twice_is_refused_though_torch_reads_its_first_copy(tmp_path):
    weight = torch.randn(4, 4)
    save_bin({"w": weight}, tmp_path / "x.bin")
    archive = zipfile.ZipFile(tmp_path / "x.bin")
    storage = next(name for name in archive.namelist() if name.endswith("/data/0"))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as twice, pytest.warns(UserWarning, match="Duplicate name"):
        for name in archive.namelist():
            twice.writestr(name, archive.read(name))
        twice.writestr(storage, bytes(len(archive.read(storage))))  # a second copy: zeros
    data = out.getvalue()
    assert torch.equal(torch.load(io.BytesIO(data), weights_only=True)["w"], weight)  # the first copy
    with pytest.raises(ExtractionError, match=f"holds member {storage} twice"):
        torch_zip_index(reading(data), len(data), "x.bin")


@pytest.mark.parametrize(
    "shape, stride, offset, elements, problem",
    [
        ((2**14, 2**14), (0, 0), 0, 1, "more than its storage's 1"),
        ((4, 4), (4, 1), 1, 16, "past the end of its storage"),
        ((4, 4), (-4, 1), 12, 16, "non-negative integers"),
        ((-4, 4), (4, 1), 0, 16, "non-negative integers"),
        ((4, 4), (4,), 0, 16, "non-negative integers"),
        ((2**62, 2**62, 0), (1, 1, 1), 0, 16, "overflow 64-bit"),
        ((1, 4), (2**64, 1), 0, 16, "overflow 64-bit"),
    ],
    ids=["stride-0", "past-the-end", "negative-stride", "negative-size", "strides-missing", "sizes", "strides"],
)
def test_a_location_that_is_no_view_of_its_storage_is_refused(shape, stride, offset, elements, problem):
    """The one rule for every location, a ``.bin``'s view or a safetensors header's entry, on disk and on a hub."""
    with pytest.raises(ExtractionError, match=problem):
        TensorLocation(
            file="model.bin",
            dtype=torch.float32,
            dtype_name="float32",
            shape=shape,
            stride=stride,
            storage="archive/data/0",
            storage_offset=offset,
            storage_bytes=4 * elements,
            data_start=64,
        )
