"""``attnstruct train`` keeps its weights and resumes from its run folder alone."""

import json

import pytest
import torch

from attnstruct import cli
from attnstruct.training import run_folder

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TINY = [
    "--task", "vision", "--source", "synthetic-digits", "--n-images", "100", "--objective", "masked",
    "--steps", "20", "--batch-size", "8", "--warmup", "2", "--log-every", "5", "--eval-every", "10",
    "--checkpoint-every", "5", "--d-model", "16", "--n-layers", "2", "--n-heads", "2",
]  # fmt: skip


def test_snapshots_and_the_final_weights_are_folders_that_score_reads(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["train", "--run-dir", str(run), *TINY, "--snapshot-every", "10", "--save-final"]) == 0
    folders = [run / "snapshots" / f"step{step:06d}" for step in (0, 10, 20)] + [run / "final"]
    for folder in folders:
        assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    capsys.readouterr()
    for folder in folders:
        assert cli.main(["score", str(folder)]) == 0, capsys.readouterr().err
    assert json.loads((run / "final" / "config.json").read_text())["attnstruct"]["step"] == 20


def test_the_final_weights_are_the_last_snapshot(tmp_path):
    from safetensors.torch import load_file

    run = tmp_path / "run"
    assert cli.main(["train", "--run-dir", str(run), *TINY, "--snapshot-every", "10", "--save-final"]) == 0
    final, last = (
        load_file(run / "final" / "model.safetensors"),
        load_file(run / "snapshots/step000020/model.safetensors"),
    )
    assert final.keys() == last.keys() and all(torch.equal(final[k], last[k]) for k in final)


def test_a_resume_needs_only_the_run_folder_and_says_from_which_step(tmp_path, capsys):
    run = tmp_path / "run"

    def stop_at_step_12(step, model):
        if step == 12:
            raise KeyboardInterrupt

    from attnstruct.training import engine

    original = engine.train
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "train", lambda *a, **k: original(*a, **{**k, "callback": stop_at_step_12}))
        assert cli.main(["train", "--run-dir", str(run), *TINY]) == 130  # Ctrl-C: one line, exit 130
    assert (run / run_folder.CHECKPOINT_FILE).is_file()
    capsys.readouterr()
    assert cli.main(["train", "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "resuming masked-seed0 from step 10 of 20" in out and "20 steps" in out
    assert (run / run_folder.RUN_FILE).is_file()


def test_a_finished_run_without_final_weights_is_trained_again_to_keep_them(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["train", "--run-dir", str(run), *TINY]) == 0
    capsys.readouterr()
    assert cli.main(["train", "--run-dir", str(run), "--save-final"]) == 0
    assert "lacks its final weights; training it again" in capsys.readouterr().out
    assert (run / "final" / "model.safetensors").is_file()
