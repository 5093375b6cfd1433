"""``pytorch_model.bin`` checkpoints (``torch.save`` ZIP archives) read by byte ranges, on a hub or on disk.

Each file's index comes from two or three reads (:func:`attnstruct.checkpoints.torch_zip.torch_zip_index`: the
tail with the end records, the central directory, ``data.pkl`` with ``.storage_alignment`` and ``byteorder``); then
each tensor is one range from its storage member's local header to the end of its view (the header's length
guessed by torch's alignment rule, :func:`~attnstruct.checkpoints.torch_zip.torch_header_length`, and checked), so
a layer's query/key weights cost a request each and the embeddings, the MLPs and the value rows of a fused QKV
weight are never read. The pickle is never run: only tensor metadata is unpickled, and any other global is
refused.

A file in the legacy format (torch before 1.6, not a ZIP archive) raises
:class:`~attnstruct.checkpoints.torch_zip.NotAZipArchive` from the constructor, for the caller to read it whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from .remote_tensors import RangeTensorSource, TensorLocation
from .torch_zip import LOCAL_HEADER, local_header_length, torch_zip_index


class RemoteTorchBin(RangeTensorSource):
    """``pytorch_model.bin`` (or its shards) as a lazy tensor source.

    Args:
        reader: a :class:`~attnstruct.checkpoints.remote_safetensors.RangeReader` (hub, disk cache) or a
            :class:`~attnstruct.checkpoints.local_reader.LocalFileReader`.
        files: the file names (``pytorch_model.bin``, or the values of the index's ``weight_map``).
        config: the checkpoint's ``config.json`` as a :class:`~attnstruct.checkpoints.extract.hf.JsonConfig`.
        sizes: ``{file: bytes}`` for each of ``files``.
        description: what the messages call the checkpoint (``repo@commit`` or the folder).
        workers: threads for :meth:`prefetch`.
    """

    def __init__(
        self, reader, files: list[str], config, *, sizes: Mapping[str, int], description: str, workers: int = 4
    ):
        index = {}
        for file in files:
            tensors = torch_zip_index(partial(reader.read, file), sizes[file], f"{description}/{file}")
            for name, tensor in tensors.items():
                member = tensor.member
                index[name] = TensorLocation(
                    file=file,
                    dtype=tensor.dtype,
                    dtype_name=str(tensor.dtype).removeprefix("torch."),
                    shape=tensor.shape,
                    stride=tensor.stride,
                    storage=member.name,
                    storage_offset=tensor.storage_offset,
                    storage_bytes=member.size,
                    header_start=member.header_offset,
                    header_guess=tensor.header_guess,
                    header_min=LOCAL_HEADER.size + len(member.name.encode()),
                )
        super().__init__(
            reader,
            index,
            config,
            description=description,
            workers=workers,
            file_sizes={file: sizes[file] for file in files},
            header_length=local_header_length,
        )
