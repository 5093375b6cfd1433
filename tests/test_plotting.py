"""One style, and figure files that are identical when regenerated."""

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PathCollection  # noqa: E402

from attnstruct.report import plotting


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


def test_quartiles_pool_the_named_dims_per_step():
    import xarray as xr

    values = xr.DataArray(np.arange(24.0).reshape(2, 3, 4), dims=("seed", "layer", "step"))
    low, mid, high = plotting.quartiles(values)
    pooled = values.values.reshape(6, 4)
    np.testing.assert_allclose(mid, np.median(pooled, axis=0))
    np.testing.assert_allclose(low, np.quantile(pooled, 0.25, axis=0))
    np.testing.assert_allclose(high, np.quantile(pooled, 0.75, axis=0))


def test_the_null_band_spans_the_central_95_percent():
    fig, ax = plt.subplots()
    samples = np.arange(1001.0)
    plotting.null_band(ax, samples, "null")
    band, line = ax.patches[0], ax.lines[0]
    low, high = band.get_y(), band.get_y() + band.get_height()
    assert (low, high) == (25.0, 975.0) and line.get_ydata()[0] == 500.0
    assert [h.get_label() for h in (band, line)] == ["null: 95% band", "null: median"]
    plt.close(fig)


def main_figure_inputs():
    """Our stacks (model a: an encoder; model b: encoder, decoder and cross) and four of the authors' rows."""
    import pandas as pd

    rows = [("a", "encoder", 1e6, 0.5), ("b", "encoder", 2e6, 0.4), ("b", "decoder", 2e6, 0.1), ("b", "cross", 2e6, 0)]
    summary = pd.DataFrame(
        [
            {"model": m, "stack": s, "n_params": n}
            | {f"{score}_{k}": v + d for score in ("symmetry", "directionality") for k, d in SPREAD.items()}
            for m, s, n, v in rows
        ]
    )
    reference = pd.DataFrame(
        {
            "role": ["encoder", "encoder", "decoder", "decoder"],
            "n_params": [1e7, 1e8, 1e9, 1e10],
            "symmetry_median": [0.3, 0.6, 0.05, 0.0],
            "directionality_median": [-0.1, 0.0, -0.3, -0.5],
            "caveats": [None, None, None, "gqa_head_pairing_suspect"],
        }
    )
    return summary, reference


SPREAD = {"median": 0.0, "q25": -0.05, "q75": 0.1}


def test_the_main_figure_draws_our_self_attention_stacks_with_interquartile_bars():
    summary, reference = main_figure_inputs()
    fig = plotting.main_figure(summary, reference)
    ax = fig.axes[0]
    points = [(c.lines[0].get_xdata()[0], c.lines[0].get_ydata()[0], c.lines[0].get_color()) for c in ax.containers]
    assert points == [
        (1e6, 0.5, plotting.ENCODER_COLOR),
        (pytest.approx(2e6 * 10**-0.03), 0.4, plotting.ENCODER_COLOR),  # b's two stacks drawn apart
        (pytest.approx(2e6 * 10**0.03), 0.1, plotting.DECODER_COLOR),
    ]  # the cross stack is left out
    bars = ax.containers[0].lines[2][0].get_segments()[0]
    assert bars[:, 1].tolist() == [0.45, 0.6]
    assert [a.get_title() for a in fig.axes[:2]] == [
        "symmetry (median over layers, IQR)",
        "directionality (median over layers, IQR)",
    ]
    plt.close(fig)


@pytest.mark.parametrize("caveat_rows, n_reported", [(False, 3), (True, 4)])
def test_the_main_figure_draws_the_caveat_rows_only_when_asked(caveat_rows, n_reported):
    summary, reference = main_figure_inputs()
    fig = plotting.main_figure(summary, reference, caveat_rows=caveat_rows)
    ax = fig.axes[1]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]  # the errorbars are LineCollections
    offsets = np.concatenate([c.get_offsets() for c in scatters])
    assert len(offsets) == n_reported
    assert ([-0.5] in offsets[:, 1:].tolist()) == caveat_rows
    plt.close(fig)


def test_the_main_figure_legend_lists_ours_first():
    summary, reference = main_figure_inputs()
    fig = plotting.main_figure(summary, reference, caveat_rows=True)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels[:3] == [
        "a, encoder stack (this notebook)",
        "b, encoder stack (this notebook)",
        "b, decoder stack (this notebook)",
    ]
    assert labels[3:] == [
        "encoders, reported by the paper",
        "encoders with a known caveat, reported by the paper",
        "decoders, reported by the paper",
        "decoders with a known caveat, reported by the paper",
    ]
    plt.close(fig)


def test_the_main_figure_with_one_marker_per_role_has_one_legend_entry_per_role():
    summary, reference = main_figure_inputs()
    fig = plotting.main_figure(summary, reference, markers_per_model=False, label="this sweep")
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels[:2] == ["encoder stacks (this sweep)", "decoder stacks (this sweep)"]
    assert {c.lines[0].get_marker() for c in fig.axes[0].containers} == {"o"}
    plt.close(fig)


def test_the_main_figure_draws_vision_encoder_stacks_in_their_own_colour():
    import pandas as pd

    summary, reference = main_figure_inputs()
    vision = summary.iloc[[0]].assign(model="v", role="vision encoder", n_params=3e6)
    fig = plotting.main_figure(pd.concat([summary, vision]), reference, markers_per_model=False)
    main = plotting.MAIN_ROLES
    colours = [c.lines[0].get_color() for c in fig.axes[0].containers]
    assert colours.count(plotting.VISION_COLOR) == 1 and colours.count(plotting.ENCODER_COLOR) == 2
    assert plotting.VISION_COLOR not in (plotting.ENCODER_COLOR, plotting.DECODER_COLOR, plotting.CROSS_COLOR)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert [label.split(" (")[0] for label in labels[:3]] == [f"{group} stacks" for group in (*main, plotting.VISION)]
    plt.close(fig)


def test_message_title_is_the_figures_suptitle():
    fig, _ = plt.subplots()
    text = plotting.message_title(fig, "Encoders are more symmetric")
    assert fig._suptitle is text and text.get_text() == "Encoders are more symmetric"
    assert text.get_fontweight() == "bold"
    plt.close(fig)


def test_median_and_range_draws_the_median_line_and_the_seed_range():
    import xarray as xr

    values = xr.DataArray(
        np.array([[0.0, 1.0], [2.0, 5.0], [4.0, 3.0]]), dims=("seed", "step"), coords={"step": [0, 1]}
    )
    fig, ax = plt.subplots()
    plotting.median_and_range(ax, values, "k", label="m")
    assert ax.lines[0].get_ydata().tolist() == [2.0, 3.0] and ax.lines[0].get_label() == "m"
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == 0.0 and band.max() == 5.0
    plt.close(fig)


def test_energy_shares_add_up_to_one_and_differ_by_the_symmetry_score():
    from attnstruct.scores import symmetry_score

    m = np.random.default_rng(3).standard_normal((10, 10))
    m = m + 0.5 * m.T
    sym, skew = plotting.energy_shares(m)
    assert sym + skew == pytest.approx(1.0)
    assert sym - skew == pytest.approx(float(symmetry_score(m)))


def test_symmetric_and_skew_share_one_scale_and_name_their_energy():
    a = np.random.default_rng(4).standard_normal((12, 12))
    fig, axes = plt.subplots(1, 2)
    plotting.symmetric_and_skew(axes, a + a.T, size=6, label="L\n")
    sym, skew = (ax.images[0] for ax in axes)
    assert sym.get_clim() == skew.get_clim() and sym.get_clim()[0] == -sym.get_clim()[1]
    assert np.allclose(skew.get_array(), 0) and sym.get_array().shape == (6, 6)
    assert axes[0].get_title().startswith("L\nsymmetric part") and "100%" in axes[0].get_title()
    plt.close(fig)


def test_coefficient_heatmap_greys_unused_pairs_and_clips_robustly():
    beta = np.tril(np.ones((20, 20)))
    beta[0, 0] = 100.0  # one huge coefficient must not set the scale
    fig, ax = plt.subplots()
    image = plotting.coefficient_heatmap(ax, beta)
    assert image.get_clim() == (-1.0, 1.0)
    assert image.get_array().mask[0, 1] and not image.get_array().mask[1, 0]
    plt.close(fig)


def test_a_long_message_title_is_wrapped_to_the_width_of_its_figure():
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(4, 3))
    title = plotting.message_title(fig, "word " * 12)
    width = plotting.title_width(fig, title.get_fontsize())
    lines = title.get_text().split("\n")
    assert len(lines) == 2 and all(len(line) <= width for line in lines)
    assert title.get_text().split() == ["word"] * 12
    plt.close(fig)


def test_a_message_title_takes_at_most_two_lines_however_long():
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(4, 3))
    title = plotting.message_title(fig, "word " * 60 + "\nsecond line")
    width = plotting.title_width(fig, title.get_fontsize())
    lines = title.get_text().split("\n")
    assert len(lines) <= plotting.TITLE_LINES and all(len(line) <= width for line in lines), lines
    assert title.get_fontsize() >= plotting.TITLE_MIN_POINTS and lines[0].startswith("word word")
    plt.close(fig)


def titled(suptitle: str, *, y: float = 0.98, axes_title: str = "") -> plt.Figure:
    """Two panels with ``axes_title`` over the first and a suptitle at height ``y`` (figure fraction)."""
    plotting.set_style()
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
    axes[0].set_title(axes_title)
    fig.suptitle(suptitle, y=y)
    return fig


def test_savefig_records_the_titles_and_panels_beside_the_figure(tmp_path):
    fig = titled("a title", axes_title="left panel")
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    layout = plotting.read_layout(tmp_path / "fig.png")
    assert [(t["text"], t["lines"], t["panel"]) for t in layout["titles"]] == [
        ("a title", 1, None),
        ("left panel", 1, 0),
    ]
    assert len(layout["panels"]) == 2
    assert plotting.title_faults(layout) == []


def test_a_panel_title_beside_a_tall_y_label_is_no_fault(tmp_path):
    """A short panel with a long y-label: the label reaches above the plot area, level with the title, but to its
    left; the union of the panel's parts would cover the title, the parts do not."""
    plotting.set_style()
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.plot([0, 1], [0, 1])
    ax.set(ylabel="a long label that reaches above the plot area", title="the panel's title")
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    layout = plotting.read_layout(tmp_path / "fig.png")
    label_top = max(box[3] for box in layout["panels"][0])
    assert label_top > layout["titles"][0]["box"][1]  # the label's box reaches the title's height
    assert plotting.title_faults(layout) == []


def test_a_suptitle_printed_over_a_panel_is_a_fault(tmp_path):
    fig = titled("a title set low", y=0.5)
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    assert plotting.title_faults(plotting.read_layout(tmp_path / "fig.png")) == [
        "title 'a title set low' overlaps panel 1 of 2",
        "title 'a title set low' overlaps panel 2 of 2",
    ]


def test_a_title_of_more_than_two_lines_is_a_fault(tmp_path):
    fig = titled("", axes_title="one\ntwo\nthree")
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    assert plotting.title_faults(plotting.read_layout(tmp_path / "fig.png")) == ["title 'one two three' has 3 lines"]


@pytest.mark.parametrize("words", [4, 14])
def test_a_message_title_sits_clear_of_the_panels_whatever_its_lines(tmp_path, words):
    plotting.set_style()
    fig, axes = plt.subplots(1, 2, figsize=(6, 2.5))
    for ax in axes:
        ax.plot([0, 1], [0, 1])
        ax.set_title("panel")
    plotting.message_title(fig, " ".join(["symmetry"] * words))
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    layout = plotting.read_layout(tmp_path / "fig.png")
    assert layout["titles"][0]["lines"] == (1 if words == 4 else 2)
    assert plotting.title_faults(layout) == []


def test_a_two_line_panel_title_under_a_figure_title_is_a_fault(tmp_path):
    fig = titled("the\nmessage", y=1.4, axes_title="one\ntwo")
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    assert plotting.title_faults(plotting.read_layout(tmp_path / "fig.png")) == [
        "title 'one two' has 2 lines under a figure title of 2"
    ]


def test_a_title_cut_short_is_a_fault(tmp_path):
    plotting.set_style()
    fig, ax = plt.subplots(figsize=(4, 3))
    plotting.message_title(fig, " ".join(["symmetry"] * 60))
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    (fault,) = plotting.title_faults(plotting.read_layout(tmp_path / "fig.png"))
    assert fault.endswith("is cut short")


def test_a_title_left_out_of_the_saved_image_is_a_fault(tmp_path):
    fig = titled("above the image", y=1.2)
    fig._suptitle.set_in_layout(False)  # bbox "tight" then crops it away
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    assert plotting.title_faults(plotting.read_layout(tmp_path / "fig.png")) == [
        "title 'above the image' lies outside the saved image"
    ]


def test_robust_limits_leave_out_a_spike_and_keep_zero():
    values = np.r_[np.linspace(0.01, 0.02, 99), 5.0]  # one spike
    low, high = plotting.robust_limits(values)
    assert low == 0.0 and 0.02 <= high < 0.1


def test_a_figure_title_over_a_panels_title_is_a_fault(tmp_path):
    fig = titled("a title set on the panel's", y=0.92, axes_title="the panel's title")
    plotting.savefig(fig, tmp_path / "fig")
    plt.close(fig)
    assert 'title "a title set on the panel\'s" overlaps the title of panel 1' in plotting.title_faults(
        plotting.read_layout(tmp_path / "fig.png")
    )


def test_a_licence_note_lies_under_the_panels_and_inside_the_saved_image(tmp_path):
    fig = draw()
    note = plotting.licence_note(fig, "iglm, iglm-s")
    (png, _) = plotting.savefig(fig, tmp_path / "fig")
    (plain, _) = plotting.savefig(draw(), tmp_path / "plain")
    renderer = fig.canvas.get_renderer()
    panels_bottom = min(ax.get_tightbbox(renderer).y0 for ax in fig.axes)
    box = note.get_window_extent(renderer)
    plt.close("all")
    assert "iglm, iglm-s" in note.get_text() and box.y1 <= panels_bottom
    assert plt.imread(png).shape[0] > plt.imread(plain).shape[0]  # the tight box grew to hold the note
