"""What is trained on: each task supplies the model, the batch of a step, the loss and the evaluation to the loop of
:mod:`attnstruct.training.engine`.

* :mod:`.text` and :mod:`.corpus`: masked LM and next-token prediction on the packaged plays or a given text;
* :mod:`.vision` and :mod:`.images`: four objectives on 8x8 digit images;
* :mod:`.text_config` and :mod:`.vision_config`: the two tasks' configurations, without torch;
* :mod:`.toy_tasks`: notebook 04's copy and Markov tasks, with their own one-layer model and loop.
"""
