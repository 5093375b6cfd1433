"""One style, and figure files that are identical when regenerated."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnstruct import plotting  # noqa: E402


def draw():
    plotting.set_style()
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    axes[0].plot([0, 1, 2], [0.1, 0.5, 0.3], color=plotting.ENCODER_COLOR, label="encoder")
    axes[0].plot([0, 1, 2], [0.0, -0.2, -0.4], color=plotting.DECODER_COLOR, label="decoder")
    axes[0].legend()
    plotting.matrix_heatmap(axes[1], np.random.default_rng(0).standard_normal((8, 8)), title="W_qk")
    return fig


def test_savefig_is_byte_reproducible(tmp_path):
    first = plotting.savefig(draw(), tmp_path / "a" / "fig")
    second = plotting.savefig(draw(), tmp_path / "b" / "fig")
    plt.close("all")
    assert [p.suffix for p in first] == [".png", ".pdf"]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert b"CreationDate" not in first[1].read_bytes()


def test_encoder_and_decoder_colours_differ():
    assert plotting.ROLE_COLORS["encoder"] != plotting.ROLE_COLORS["decoder"]


def test_savefig_rejects_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="format"):
        plotting.savefig(draw(), tmp_path / "fig", formats=("bmp",))
    plt.close("all")


def test_signed():
    assert plotting.signed(-1e-9) == "+0.00"
    assert plotting.signed(-0.126) == "-0.13"
    assert plotting.signed(0.5, 1) == "+0.5"
