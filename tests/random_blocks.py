"""Random attention blocks for tests that score checkpoints without reading one."""

import torch

from attnstruct.checkpoints.extract import AttentionBlock


def encoder_blocks(n_layers: int, seed: int, d_model: int = 16, n_heads: int = 4) -> list[AttentionBlock]:
    """Random bidirectional blocks, one per layer."""
    gen = torch.Generator().manual_seed(seed)
    shape = (n_heads, d_model // n_heads, d_model)
    return [
        AttentionBlock("encoder", i, torch.randn(*shape, generator=gen), torch.randn(*shape, generator=gen), False, 4)
        for i in range(n_layers)
    ]
