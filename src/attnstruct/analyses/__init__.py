"""What each notebook computes and decides, one module per notebook, each returning the facts its notebook's sentence
templates state (every verdict through :func:`attnstruct.stats.decide`).

:mod:`.nb01_bilinear_form` (01: the identity check, its example matrices and layers against random ones, and the facts
its sentences and titles state), :mod:`.nb02_scores` (02; the null ensembles it shares with 01 in
:mod:`.null_ensembles`), :mod:`.nb03_pretrained_models` (03: its scores, nulls, example matrices, checks, plan,
verdicts, dataset and the facts its sentences and titles state), :mod:`.nb04_gradient_structure` (04: its runs, learning
criterion, verdicts, plan and the facts its sentences and titles state), :mod:`.nb05_training_dynamics` (05) and
:mod:`.nb06_symmetric_init` (06: each its numbers, verdicts, plan and the facts its sentences state; the readings of
their text runs and whether they learned in :mod:`.text_runs`), :mod:`.nb07_vision` (07: its numbers, verdicts, plan,
the tables its figures draw, its dataset and the facts its sentences state), :mod:`.nb09_dynamics_at_scale` (09: its
numbers, verdicts, plan and the facts its sentences state; its local checkpoint series made by :mod:`.local_series`),
:mod:`.nb08_model_sweep` (08: its list of models, plan, verdicts, dataset and the facts its sentences and titles state),
:mod:`.paper_comparison` (the authors' values beside ours, and the facts of the main figure's title: 03, 07, 08),
:mod:`.pretrained_scores` (a scored checkpoint dataset per model and stack: 03, 07, 08), :mod:`.pretrained_ordering`
(encoders against decoders by model family: the claims 03 and 08 share), :mod:`.matrix_readings` (the readings of one
layer matrix that a figure draws: 01, 03), and :mod:`.findings` (the headline findings, checked on the datasets of
``make reproduce`` by ``make findings``).
"""
