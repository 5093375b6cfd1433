"""Scores of one block on a device: grouped-query layers from group sums, against formed matrices."""

import numpy as np
import pytest
import torch

from attnstruct.checkpoints.extract import AttentionBlock, expand_kv_heads
from attnstruct.checkpoints.scoring import block_precision, layer_factors, score_block
from attnstruct.devices import DeviceError, resolve_device

from reference import directionality_paper, symmetry_paper


def gqa_block(n_heads=8, n_kv=2, d_head=4, d_model=24, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    w_q = torch.randn(n_heads, d_head, d_model, generator=g).to(dtype)
    keys = torch.randn(n_kv, d_head, d_model, generator=g).to(dtype)
    return AttentionBlock("decoder", 0, w_q, expand_kv_heads(keys, n_heads), True, n_kv)


def formed_layer_matrix(block):
    """sum_h W_q^h^T W_k^h with the expanded key heads, formed in float64 (the definition)."""
    q, k = block.w_q.double(), block.w_k.double()
    return sum(q[h].T @ k[h] for h in range(block.n_heads)).numpy()


@pytest.mark.parametrize("n_heads, n_kv", [(8, 8), (8, 2), (8, 1), (6, 3)])
def test_layer_scores_from_group_sums_equal_the_formed_matrix(n_heads, n_kv):
    block = gqa_block(n_heads, n_kv)
    m = formed_layer_matrix(block)
    s = score_block(block, precision="float64")
    assert float(s.symmetry) == pytest.approx(symmetry_paper(m), abs=1e-12)
    assert float(s.directionality) == pytest.approx(directionality_paper(m), abs=1e-12)


def test_group_sums_have_the_key_width():
    block = gqa_block(8, 2, d_head=4, d_model=24)
    a, b = layer_factors(block)
    assert a.shape == b.shape == (2 * 4, 24)
    assert a.dtype == torch.float64
    np.testing.assert_allclose((a.T @ b).numpy(), formed_layer_matrix(block), atol=1e-12)


def test_per_head_scores_use_each_heads_own_key_head():
    block = gqa_block(6, 3)
    s = score_block(block, per_head=True, precision="float64")
    assert s.symmetry.shape == (6,)
    for h in range(6):
        m = (block.w_q[h].double().T @ block.w_k[h].double()).numpy()
        assert float(s.symmetry[h]) == pytest.approx(symmetry_paper(m), abs=1e-12)


def test_keys_not_shared_as_announced_are_refused():
    block = gqa_block(8, 2)
    broken = AttentionBlock("decoder", 0, block.w_q, torch.randn_like(block.w_k), True, 2)
    with pytest.raises(ValueError, match="not shared in groups of 4"):
        layer_factors(broken)


def test_results_come_back_on_the_cpu_in_float64():
    s = score_block(gqa_block(dtype=torch.bfloat16), device="cpu")
    assert s.symmetry.device.type == "cpu" and s.symmetry.dtype == torch.float64


def test_bfloat16_weights_score_like_their_float64_values():
    block = gqa_block(dtype=torch.bfloat16)
    exact = formed_layer_matrix(block)
    s = score_block(block, precision="float64")
    assert float(s.symmetry) == pytest.approx(symmetry_paper(exact), abs=1e-12)


def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_is_one_line_error():
    with pytest.raises(DeviceError, match="no CUDA device") as err:
        resolve_device("cuda")
    assert "\n" not in str(err.value)


def test_precision_rule():
    assert block_precision(768, "auto") == "float64" and block_precision(4096, "auto") == "float32"
    with pytest.raises(ValueError, match="precision"):
        block_precision(10, "float16")


def test_a_block_that_cannot_be_scored_is_an_extraction_error_naming_it():
    """A zero layer matrix (an all-zero query weight) has no symmetry: the table refuses the block in one line."""
    from attnstruct.checkpoints.extract import ExtractionError
    from attnstruct.checkpoints.scoring import score_blocks

    block = gqa_block(4, 4)
    zero = AttentionBlock("decoder", 3, torch.zeros_like(block.w_q), block.w_k, True, 4, source_name="q3.weight")
    with pytest.raises(ExtractionError, match=r"^decoder layer 3 \(q3\.weight\): symmetry score is undefined"):
        score_blocks([block, zero], device="cpu")


@pytest.mark.parametrize(
    "shapes, n_kv, problem",
    [
        (((2, 4, 8), (2, 4, 4)), 2, "w_q and w_k must both be"),
        (((2, 0, 8), (2, 0, 8)), 2, "no empty axis"),
        (((4, 2, 8), (4, 2, 8)), 3, "cannot share 3 key heads"),
        (((4, 2, 8), (4, 2, 8)), 0, "0 key heads"),
    ],
    ids=["key-narrower", "empty", "uneven-groups", "no-key-heads"],
)
def test_a_block_a_reader_must_never_yield_is_refused_naming_it(shapes, n_kv, problem):
    from attnstruct.checkpoints.extract import ExtractionError

    w_q, w_k = (torch.ones(shape) for shape in shapes)
    with pytest.raises(ExtractionError, match=f"^layer.q.weight: .*{problem}"):
        AttentionBlock("encoder", 0, w_q, w_k, False, n_kv, source_name="layer.q.weight")
