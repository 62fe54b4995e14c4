"""Fused RNN cells for the emulated device: ``aten::_thnn_fused_lstm_cell`` / ``_gru_cell``.

ATen's LSTM/GRU/LSTMCell/GRUCell call these fused kernels for every non-CPU tensor (CUDA and
the private-use backend alike; ``aten/src/ATen/native/RNN.cpp``), and torch has them for CUDA
only. They are registered here on ``AutogradPrivateUse1`` as compositions of ordinary ops, so
autograd differentiates the composition and no fused backward kernel is needed. The math is
the cells' documented one (``torch.nn.LSTMCell`` / ``torch.nn.GRUCell``); the workspace tensor,
which only the fused backward reads, holds the activated gates as on CUDA.
"""

from __future__ import annotations

import torch

__all__ = ["install_rnn_kernels"]


def _gates(input_gates, hidden_gates, input_bias, hidden_bias):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    return input_gates, hidden_gates


def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    """(hy, cy, workspace): gates i, f, g, o; cy = f*cx + i*g; hy = o*tanh(cy)."""
    input_gates, hidden_gates = _gates(input_gates, hidden_gates, input_bias, hidden_bias)
    i, f, g, o = (input_gates + hidden_gates).chunk(4, dim=1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], dim=1).detach()


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    """(hy, workspace): r, z from both gates; n = tanh(i_n + r*h_n); hy = (1-z)*n + z*hx."""
    input_gates, hidden_gates = _gates(input_gates, hidden_gates, input_bias, hidden_bias)
    i_r, i_z, i_n = input_gates.chunk(3, dim=1)
    h_r, h_z, h_n = hidden_gates.chunk(3, dim=1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    hy = (1 - z) * n + z * hx
    return hy, torch.cat([r, z, n, hx, h_n], dim=1).detach()


def install_rnn_kernels() -> torch.library.Library:
    """Register both cells; the caller keeps the returned Library alive."""
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_thnn_fused_lstm_cell", fused_lstm_cell, "AutogradPrivateUse1")
    lib.impl("_thnn_fused_gru_cell", fused_gru_cell, "AutogradPrivateUse1")
    return lib
