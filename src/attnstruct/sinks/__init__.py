"""Attention sinks: where attention goes whatever the query, which key channels carry it, and what the score sees.

* :mod:`.attention_mass`: the mass queries put on the sink positions, per layer and head, and the uniform share;
* :mod:`.attention_passes`: forward passes that return attention probabilities, the residual stream and the key
  projections' inputs, for the project's own model and for transformers models (packaged checkpoints among them);
* :mod:`.sink_channels`: the dominant key channels of ``W_qk``, the channels that set the first position apart,
  the massive-activation channels;
* :mod:`.channel_ablation`: the change of the sink mass when key channels are zeroed, against random channels;
* :mod:`.score_blind_spots`: directionality without the sink channels, and what the score cannot see (QK-norm,
  query/key biases and the key-side bias term);
* :mod:`.sink_diagnostics`: all of it for one model and one batch, as one record;
* :mod:`.packaged`: all of it for the packaged text checkpoints on one held-out passage, one row per model.
"""
