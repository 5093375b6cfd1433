"""The one training loop and what every run shares.

* :mod:`.engine`: the task-free loop (a task supplies the model, the batch of a step, the loss, the evaluation);
* :mod:`.model`: the BERT-like Transformer, bidirectional or causal; :mod:`.config`: what every configuration can
  do (built from a notebook's parameters, checked, recorded, digested); :mod:`.run_config` and
  :mod:`.model_config`: the fields every run shares and the model's shape, without torch;
* :mod:`.records`: what a run logs; :mod:`.run_folder`: a run's checkpoint, finished dataset and reuse key;
* :mod:`.processes`: runs side by side in processes, and one dataset from many runs.

The tasks themselves live in :mod:`attnstruct.tasks`; the ``attnstruct train`` command in :mod:`attnstruct.cli.train`.
"""
