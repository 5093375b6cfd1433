"""Snapshots of a run's weights as checkpoint folders (a local series), read back by the checkpoint readers."""

import json

import numpy as np
import pytest
import xarray as xr

from attnstruct.checkpoints.extract import iter_blocks
from attnstruct.checkpoints.scoring import score_blocks
from attnstruct.tasks import text, text_config
from attnstruct.training import engine, snapshots

WORDS = "the king is dead long live the king and all his men who stood upon the wall at dawn".split()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("text") / "tiny.txt"
    lines = [" ".join(rng.choice(WORDS, size=12)) for _ in range(800)]
    path.write_text("# one\n" + "\n".join(lines[:400]) + "\n# two\n" + "\n".join(lines[400:]) + "\n")
    return path


def tiny(text_file, objective="mlm", **changes) -> text_config.TextConfig:
    values = dict(
        objective=objective,
        corpus=str(text_file),
        vocab_size=300,
        d_model=16,
        n_layers=2,
        n_heads=2,
        seq_len=16,
        batch_size=4,
        steps=12,
        warmup=2,
        log_every=2,
        eval_every=4,
        eval_batches=1,
        checkpoint_every=4,
    )
    return text_config.TextConfig(**{**values, **changes})


def test_snapshot_steps_are_the_start_the_multiples_and_the_end():
    assert snapshots.snapshot_steps(12, 4) == [0, 4, 8, 12]
    assert snapshots.snapshot_steps(10, 4) == [0, 4, 8, 10]
    assert snapshots.snapshot_steps(10, None) == [] == snapshots.snapshot_steps(10, 0)


@pytest.mark.parametrize("every", [3, -2, True, 2.0])
def test_snapshots_every_other_than_a_multiple_of_log_every_is_refused(every):
    with pytest.raises(ValueError, match="snapshot_every must be 0 or a multiple of log_every"):
        snapshots.check_every(every, 2)


@pytest.mark.parametrize("objective", ["mlm", "next-token"])
def test_each_snapshot_scores_as_the_run_recorded_it_at_that_step(text_file, tmp_path, objective, one_torch_thread):
    """The folders are real checkpoints: read back by the readers of any checkpoint, each scores exactly what the
    training loop recorded at its step, layer by layer."""
    run_dir = tmp_path / "run"
    ds = engine.train(text.TextTask(tiny(text_file, objective)), run_dir, snapshot_every=4)
    kept = snapshots.complete_snapshots(run_dir)
    assert sorted(kept) == [0, 4, 8, 12]
    for step, folder in kept.items():
        config = json.loads((folder / "config.json").read_text())
        assert config["model_type"] == ("attnstruct-decoder" if objective != "mlm" else "attnstruct-encoder")
        assert config["attnstruct"]["step"] == step and config["attnstruct"]["tokens_per_step"] == 4 * 16
        table = score_blocks(iter_blocks(folder), device="cpu")
        assert set(table["stack"]) == {"decoder" if objective != "mlm" else "encoder"}
        recorded = ds["symmetry"].sel(step=step).values
        np.testing.assert_allclose(table["symmetry"].to_numpy(), recorded, rtol=0, atol=1e-12)
        np.testing.assert_allclose(
            table["directionality"].to_numpy(), ds["directionality"].sel(step=step).values, rtol=0, atol=1e-12
        )


def test_a_finished_run_without_snapshots_is_trained_again_to_the_same_data(text_file, tmp_path, one_torch_thread):
    run_dir = tmp_path / "run"
    first = engine.train(text.TextTask(tiny(text_file)), run_dir)
    assert snapshots.complete_snapshots(run_dir) == {}
    messages = []
    again = engine.train(
        text.TextTask(tiny(text_file)), run_dir, snapshot_every=6, callback=lambda *_: messages.append(1)
    )
    assert messages, "the run was reused although its snapshots were missing"
    assert sorted(snapshots.complete_snapshots(run_dir)) == [0, 6, 12]
    xr.testing.assert_equal(first, again)  # snapshots change nothing that is trained
    messages.clear()
    engine.train(text.TextTask(tiny(text_file)), run_dir, snapshot_every=6, callback=lambda *_: messages.append(1))
    assert not messages  # now complete: reused, nothing trained


def test_snapshots_need_a_run_folder(text_file):
    with pytest.raises(ValueError, match="snapshots need a run folder"):
        engine.train(text.TextTask(tiny(text_file)), None, snapshot_every=4)


def test_a_run_continued_from_a_snapshot_starts_where_the_other_run_was(text_file, tmp_path, one_torch_thread):
    """A decoder trained on as an encoder: the continued run's first record is the decoder's snapshot, exactly."""
    decoder = engine.train(text.TextTask(tiny(text_file, "next-token")), tmp_path / "decoder", snapshot_every=6)
    start = snapshots.complete_snapshots(tmp_path / "decoder")[12]
    continued = tiny(text_file, "mlm", steps=6, init_from=str(start))
    assert continued.run_name() == "mlm-bert-seed0-continued"
    ds = engine.train(text.TextTask(continued), tmp_path / "continued")
    for score in ("symmetry", "directionality", "head_symmetry"):
        xr.testing.assert_equal(ds[score].sel(step=0, drop=True), decoder[score].sel(step=12, drop=True))
    assert not np.array_equal(ds["symmetry"].sel(step=6), ds["symmetry"].sel(step=0))  # and it trained on


def test_init_from_a_missing_or_other_shaped_snapshot_is_one_line(text_file, tmp_path, one_torch_thread):
    engine.train(text.TextTask(tiny(text_file)), tmp_path / "run", snapshot_every=12)
    folder = snapshots.complete_snapshots(tmp_path / "run")[12]
    with pytest.raises(ValueError, match="init_from: .* does not exist"):
        text.TextTask(tiny(text_file, init_from=str(tmp_path / "nowhere"))).build_model()
    with pytest.raises(ValueError, match="init_from: .* another model shape"):
        task = text.TextTask(tiny(text_file, d_model=32, init_from=str(folder)))
        task.build_model()
    with pytest.raises(ValueError, match="init must be 'bert'"):
        tiny(text_file, init="symmetric", init_from=str(folder))


def test_a_snapshot_is_read_by_byte_ranges_from_disk_and_the_bytes_are_counted(text_file, tmp_path, one_torch_thread):
    """A local series is read as a hub one is: the ZIP's index, then only the query/key storages, counted as
    bytes_fetched; they are the query/key bytes of the shape plus a small index."""
    from attnstruct.checkpoints.resolve import open_checkpoint
    from attnstruct.checkpoints.series import query_key_bytes

    engine.train(text.TextTask(tiny(text_file, d_model=32, vocab_size=600)), tmp_path / "run", snapshot_every=12)
    folder = snapshots.complete_snapshots(tmp_path / "run")[12]
    with open_checkpoint(str(folder)) as checkpoint:
        list(checkpoint.blocks())
        fetched = checkpoint.bytes_fetched()
    weights = query_key_bytes(2, 32, 2, 16, bytes_per_value=4, bias=True)
    assert weights <= fetched < weights + 16_000, (fetched, weights)
    assert fetched < 0.25 * (folder / snapshots.WEIGHTS).stat().st_size


def test_a_snapshots_folder_linked_out_of_the_run_folder_is_refused_and_nothing_is_written_there(text_file, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / snapshots.FOLDER).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="would lead out of"):
        engine.train(text.TextTask(tiny(text_file)), tmp_path / "run", snapshot_every=4)
    assert list(outside.iterdir()) == []


def test_a_snapshot_whose_weights_would_run_code_is_refused_by_init_from(text_file, tmp_path):
    import pickle

    touched = tmp_path / "canary"

    class Touch:
        def __reduce__(self):
            return (open, (str(touched), "w"))

    (tmp_path / snapshots.WEIGHTS).write_bytes(pickle.dumps({"weight": Touch()}))
    with pytest.raises(ValueError, match="init_from: .* holds objects other than tensors"):
        text.TextTask(tiny(text_file, init_from=str(tmp_path))).build_model()
    assert not touched.exists()
