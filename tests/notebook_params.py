"""The parameters the tests run the notebooks with: smaller than the quick profile, every cell still executed."""

# Heavy notebooks (training from scratch) run here with smaller parameters than the quick profile.
TRAINING_SMALL = {
    "seeds": [0],
    "steps": 40,
    "batch_size": 8,
    "seq_len": 32,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 2,
    "warmup": 10,
    "log_every": 10,
    "eval_every": 20,
    "eval_batches": 1,
    "checkpoint_every": 20,
}
SYMMETRIC_INIT_SMALL = {
    **TRAINING_SMALL,
    "seeds": [0, 1],
    "treated_seeds": [0, 1],
    "objectives": ["mlm"],
    "steps": 30,
    "eval_every": 10,
    "checkpoint_every": 30,
    "warmup": 5,
}
TEST_OVERRIDES: dict[str, dict] = {
    "05_training_dynamics": TRAINING_SMALL,
    "06_symmetric_init": SYMMETRIC_INIT_SMALL,
    "07_vision": {
        "n_seeds": 2,
        "steps": 60,
        "log_every": 20,
        "eval_every": 60,
        "d_model": 32,
        "n_layers": 2,
        "n_heads": 2,
        "batch_size": 16,
        "n_images": 300,
    },
}
# The smallest parameters that still exercise every cell, for the repeated-run and bad-input tests.
SMALL_PARAMETERS = {
    "05_training_dynamics": TRAINING_SMALL,
    "06_symmetric_init": SYMMETRIC_INIT_SMALL,
    "04_gradient_structure": {"n_seeds": 1, "steps": 100, "every": 50, "n_sequences": 32, "batch": 16},
    "01_bilinear_form": {"d_model": 16, "n_heads": 2, "n_layers": 1, "seq_len": 5, "example_dim": 12},
    "02_scores": {
        "d_models": [16, 32],
        "n_heads": [1, 2],
        "n_draws": 4,
        "num_stds": [1.0, 2.0],
        "sweep_d_model": 32,
        "tying_heads": 2,
        "tying_d_model": 16,
    },
    "07_vision": {
        "n_seeds": 1,
        "steps": 40,
        "log_every": 20,
        "eval_every": 40,
        "d_model": 16,
        "n_layers": 2,
        "n_heads": 2,
        "batch_size": 8,
        "n_images": 100,
    },
}
