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


def test_robust_limit_ignores_a_few_huge_entries():
    m = np.ones((20, 10))  # 200 entries: the 99th percentile lies among the ones
    m[0, 0] = 1e6
    assert plotting.robust_limit(m) == 1.0 and plotting.robust_limit(m, 100) == 1e6
    assert plotting.robust_limit(np.zeros((3, 3))) == 1.0


@pytest.mark.parametrize("sign", [1, -1])
def test_mirror_pairs_correlation_is_plus_or_minus_one_for_symmetric_and_skew(sign):
    a = np.random.default_rng(1).standard_normal((30, 30))
    fig, ax = plt.subplots()
    assert plotting.mirror_pairs(ax, a + sign * a.T, color="k", label="m") == pytest.approx(sign)
    plt.close(fig)


def test_norm_profile_draws_norms_over_their_threshold():
    m = np.random.default_rng(2).standard_normal((12, 12))
    fig, ax = plt.subplots()
    plotting.norm_profile(ax, m, color="k", label="m", top=5)
    columns, rows = ax.lines[:2]
    norms = np.linalg.norm(m, axis=0)
    assert np.allclose(columns.get_ydata(), np.sort(norms)[::-1][:5] / (norms.mean() + 2 * norms.std(ddof=1)))
    assert len(rows.get_ydata()) == 5
    plt.close(fig)
