"""The images of notebook 07: the fixed digit sets, patches and their inverse, grey-level targets."""

import pytest
import torch

from attnstruct.tasks import images as I


@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_patchify_round_trip_and_layout(p):
    images = torch.arange(3 * 64, dtype=torch.float32).reshape(3, 8, 8)
    patches = I.patchify(images, p)
    assert patches.shape == (3, (8 // p) ** 2, p * p)
    assert torch.equal(I.unpatchify(patches, p, 8, 8), images)
    # patch 1 is the second patch of the first row of patches, its pixels row-major
    if p < 8:
        assert torch.equal(patches[0, 1], images[0, :p, p : 2 * p].reshape(-1))


def test_patchify_rejects_bad_input():
    with pytest.raises(ValueError, match="does not divide"):
        I.patchify(torch.zeros(2, 8, 8), 3)
    with pytest.raises(ValueError, match="batch, height, width"):
        I.patchify(torch.zeros(8, 8), 2)
    with pytest.raises(ValueError, match="patches must be"):
        I.unpatchify(torch.zeros(2, 15, 4), 2, 8, 8)


def test_synthetic_digits_are_fixed_digit_like_images():
    a = I.load_images("synthetic-digits", 300, 0.2)
    b_images, b_labels = I.synthetic_digits(300, torch.Generator().manual_seed(I.DATA_SEED))
    assert a.train_images.shape == (240, 8, 8) and a.val_images.shape == (60, 8, 8)
    all_images = torch.cat([a.train_images, a.val_images])
    assert all_images.min() >= 0 and all_images.max() <= 1
    assert torch.equal(all_images * 16, (all_images * 16).round())  # 17 grey levels, as load_digits
    assert sorted(torch.cat([a.train_labels, a.val_labels]).bincount().tolist()) == [30] * 10
    assert torch.equal(b_labels.bincount(), torch.full((10,), 30))
    # one class's mean image differs from another's: the classes are visible in the pixels
    mean = torch.stack([b_images[b_labels == c].mean(0) for c in range(10)])
    assert float((mean[1] - mean[0]).abs().sum()) > 3.0


def test_quantise_levels():
    values = torch.tensor([0.0, 0.24, 0.25, 0.5, 0.99, 1.0])
    assert I.quantise(values, 4).tolist() == [0, 0, 1, 2, 3, 3]
    with pytest.raises(ValueError, match="levels"):
        I.quantise(values, 1)


def test_unknown_source_is_refused():
    with pytest.raises(ValueError, match="unknown image source 'cifar'"):
        I.load_images("cifar")


def test_sklearn_digits_are_the_real_images():
    data = I.load_images("sklearn-digits")
    assert len(data.train_images) + len(data.val_images) == 1797
