"""Benchmark: training throughput of our trainer against Hugging Face BERT, and the score-logging overhead.

    .venv/bin/python benchmarks/train_throughput.py [--steps 5 --rounds 3 --warmup 2 --threads 1 --device cpu]

At one configuration (default: 4 layers, d_model 128, 4 heads, batch 32 x seq 64, vocab 4000) and for each
objective ("mlm", "next-token") and dropout, times the training loop's own optimiser step,
:class:`attnstruct.training.engine.Step` (dropout seeding, autocast, the text task's summed loss, backward, gradient
clipping, AdamW, schedule), on our model and on ``transformers``' ``BertForMaskedLM`` / ``BertLMHeadModel``
(``is_decoder=True``, labels = inputs, shifted inside) built from a ``BertConfig`` of the same shape, with our
initial weights copied in, the same batches (for mlm the same corrupted inputs, labels -100 off the selected
positions), the same AdamW groups, clipping and schedule (``engine.build_optimizer``): for HF the step's
objective is the model's own mean loss. Batches are drawn before timing, for both. Rounds alternate the models
so that a change in the machine's load hits all of them; the best round counts.

Prints tokens per second (batch x seq_len per step), the ratio ours / HF (sdpa attention, the default) against
the goal of 1.5x, and the time of ``records.record_scores`` per call as a percentage of ``log_every``
training steps (goal <= 2%).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from attnstruct.checkpoints.extract import count_parameters
from attnstruct.tasks import text, text_config
from attnstruct.training import engine, records

GOAL_SPEED = 1.5
GOAL_LOGGING = 2.0  # percent


def bert_config(config: text_config.TextConfig, vocab_size: int, attn: str):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=config.d_model,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        intermediate_size=4 * config.d_model,
        max_position_embeddings=config.seq_len,
        type_vocab_size=1,  # the least HF allows; our model has no token types
        hidden_act="gelu",  # exact GELU, as nn.GELU()
        hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.dropout,
        layer_norm_eps=1e-12,
        initializer_range=0.02,
        is_decoder=config.causal,
        tie_word_embeddings=True,
        attn_implementation=attn,
    )


@torch.no_grad()
def copy_weights(ours, hf) -> None:
    """Our parameters into the HF model (token-type embedding zeroed), so both start from the same weights."""
    bert, head = hf.bert, hf.cls.predictions
    pairs = [
        (ours.token, bert.embeddings.word_embeddings),
        (ours.encoder.position, bert.embeddings.position_embeddings),
        (ours.encoder.embedding_norm, bert.embeddings.LayerNorm),
        (ours.head_transform[0], head.transform.dense),
        (ours.head_transform[2], head.transform.LayerNorm),
    ]
    for block, layer in zip(ours.encoder.blocks, bert.encoder.layer, strict=True):
        attention = layer.attention
        pairs += [
            (block.attention.query, attention.self.query),
            (block.attention.key, attention.self.key),
            (block.attention.value, attention.self.value),
            (block.attention.output, attention.output.dense),
            (block.attention_norm, attention.output.LayerNorm),
            (block.ffn[0], layer.intermediate.dense),
            (block.ffn[2], layer.output.dense),
            (block.ffn_norm, layer.output.LayerNorm),
        ]
    for source, target in pairs:
        for name, parameter in source.named_parameters():
            getattr(target, name).copy_(parameter)
    bert.embeddings.token_type_embeddings.weight.zero_()
    head.bias.copy_(ours.head_bias)


def hf_labels(batch: text.Batch, causal: bool) -> torch.Tensor:
    if causal:  # HF shifts: position t predicts inputs[t + 1], a loss at every position but the last
        return batch.inputs
    labels = torch.full_like(batch.inputs, -100)
    labels[batch.selected] = batch.targets
    return labels


class HFObjective:
    """The HF model's own mean loss as the engine's ``runner(batch) -> (total, count)`` (count 1)."""

    def __init__(self, model, labels: dict):
        self.model, self.labels = model, labels

    def __call__(self, batch):
        return self.model(input_ids=batch.inputs, labels=self.labels[id(batch)]).loss, 1


class Runner:
    """One model, its optimiser and schedule, and the engine's training step
    (:class:`attnstruct.training.engine.Step`)."""

    def __init__(self, name, task, model, batches, hf: bool):
        config = task.config
        self.name, self.batches = name, batches
        optimizer, scheduler = engine.build_optimizer(config, model)
        if hf:
            objective = HFObjective(model, {id(b): hf_labels(b, config.causal) for b in batches})
        else:
            objective = engine.Objective(task, model)
        self.step_once = engine.Step(objective, model, optimizer, scheduler, config, batches[0].inputs.device)
        self.running_loss = torch.zeros((), device=batches[0].inputs.device)
        self.step_count = 0
        self.best = float("inf")
        model.train()

    def step(self) -> None:
        self.step_count += 1
        self.running_loss += self.step_once(self.batches[(self.step_count - 1) % len(self.batches)], self.step_count)

    def timed(self, steps: int, sync) -> float:
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        float(self.running_loss)  # waits for the device
        sync()
        per_step = (time.perf_counter() - start) / steps
        self.best = min(self.best, per_step)
        return per_step


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round and model")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (models alternate); the best counts")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per model first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=4000)
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.1, 0.0])
    parser.add_argument("--objectives", nargs="+", default=["mlm", "next-token"], choices=("mlm", "next-token"))
    parser.add_argument("--hf-attn", nargs="+", default=["sdpa", "eager"], choices=("sdpa", "eager"))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = parser.parse_args()
    if "sdpa" not in args.hf_attn:
        parser.error("--hf-attn must include sdpa (the baseline of the ratio)")
    torch.set_num_threads(args.threads)
    import transformers
    from transformers import BertForMaskedLM, BertLMHeadModel

    transformers.logging.set_verbosity_error()
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    n_steps = args.warmup + args.rounds * args.steps
    base = text_config.TextConfig(
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.heads,
        batch_size=args.batch,
        seq_len=args.seq_len,
        vocab_size=args.vocab,
        steps=max(text_config.TextConfig.steps, n_steps),
        device=args.device,
    )
    data = text.TextTask(base).data
    tokens = args.batch * args.seq_len
    print(
        f"config: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, batch {args.batch} x seq "
        f"{args.seq_len} ({tokens} tokens/step), vocab {data.vocab_size}; {device.type}, torch threads "
        f"{torch.get_num_threads()}, transformers {transformers.__version__}; best of {args.rounds} rounds of "
        f"{args.steps} steps after {args.warmup} warm-up"
    )
    header = f"{'objective':<11} {'dropout':>7} {'ours tok/s':>10} " + " ".join(
        f"{'HF ' + a + ' tok/s':>15}" for a in args.hf_attn
    )
    rows, step_time, checked = [], {}, []
    batch_seconds = []
    for objective in args.objectives:
        for dropout in args.dropout:
            config = replace(base, objective=objective, dropout=dropout)
            task = text.TextTask(config)
            task.prepare()  # the tokens, read from the cache, before timing
            start = time.perf_counter()
            batches = [task.batch(s) for s in range(1, n_steps + 1)]
            batch_seconds.append((time.perf_counter() - start) / n_steps)
            batches = [b.to(device) for b in batches]
            ours = task.build_model().to(device)
            runners = [Runner("ours", task, ours, batches, hf=False)]
            for attn in args.hf_attn:
                hf_class = BertLMHeadModel if config.causal else BertForMaskedLM
                hf = hf_class(bert_config(config, data.vocab_size, attn)).to(device)
                copy_weights(ours, hf)
                n_ours, n_hf = count_parameters(ours), count_parameters(hf)
                # Both tie the output decoder to the token embedding; HF's LM heads have no pooler. The only
                # extra HF tensor is the token-type embedding (type_vocab_size 1 x d_model): a constant vector.
                assert n_hf - n_ours == args.d_model, (n_ours, n_hf)
                with torch.no_grad():
                    ours.eval(), hf.eval()
                    ids = batches[0].inputs
                    diff = float((ours(ids, config.causal) - hf(input_ids=ids).logits).abs().max())
                    ours.train(), hf.train()
                assert diff < 1e-3, f"HF {attn} logits differ from ours by {diff:.1e} with the same weights"
                checked.append(diff)
                runners.append(Runner(f"HF {attn}", task, hf, batches, hf=True))
            for runner in runners:
                for _ in range(args.warmup):
                    runner.step()
                sync()
            for _ in range(args.rounds):
                for runner in runners:
                    runner.timed(args.steps, sync)
            step_time[objective, dropout] = runners[0].best
            rows.append((objective, dropout, [tokens / r.best for r in runners], ours))
    print(
        f"parameters: ours {n_ours:,}, HF {n_hf:,} (+{n_hf - n_ours}: HF's token-type embedding, 1 x d_model; "
        f"decoder tied to the token embedding in both, no pooler in HF's LM heads); with our weights copied in, "
        f"eval-mode logits agree to {max(checked):.0e}"
    )
    print(
        f"batches drawn before timing for both: the task's batch(step) takes {1e3 * max(batch_seconds):.1f} ms "
        "per step "
        f"(not in the figures)"
    )
    print()
    print(header + f" {'ours/HF sdpa':>12}  goal >= {GOAL_SPEED}x")
    sdpa = 1 + args.hf_attn.index("sdpa")
    for objective, dropout, speeds, _ in rows:
        ratio = speeds[0] / speeds[sdpa]
        cells = " ".join(f"{s:>15,.0f}" for s in speeds[1:])
        verdict = "met" if ratio >= GOAL_SPEED else "NOT met"
        print(f"{objective:<11} {dropout:>7} {speeds[0]:>10,.0f} {cells} {ratio:>11.2f}x  {verdict}")
    print()
    log_every = base.log_every
    print(f"score logging: records.record_scores per call vs {log_every} training steps (log_every), ours")
    for objective, dropout, _, model in rows:
        log = records.Records()
        per_call = float("inf")
        for _ in range(5):
            sync()
            start = time.perf_counter()
            records.record_scores(model, log)
            per_call = min(per_call, time.perf_counter() - start)
        window = log_every * step_time[objective, dropout]
        percent = 100 * per_call / window
        verdict = "met" if percent <= GOAL_LOGGING else "NOT met"
        print(
            f"{objective:<11} dropout {dropout}: {1e3 * per_call:6.2f} ms per call vs {window:6.2f} s -> "
            f"{percent:.3f}% (goal <= {GOAL_LOGGING:g}%: {verdict})"
        )


if __name__ == "__main__":
    main()
