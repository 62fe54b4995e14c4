"""validate entries: pytorch/examples' word-language models at toy size, on CUDA as main.py --cuda runs them."""

import torch
from model import RNNModel, TransformerModel

NTOKENS, BPTT, BATCH = 50, 8, 4
device = torch.device("cuda")


def _tokens():
    return torch.randint(0, NTOKENS, (BPTT, BATCH)).to(device)


def lstm():
    model = RNNModel("LSTM", NTOKENS, 16, 16, 2, dropout=0.0).to(device)
    return model, (_tokens(), model.init_hidden(BATCH)), lambda m: torch.optim.SGD(m.parameters(), lr=0.5)


def gru_tied():
    model = RNNModel("GRU", NTOKENS, 16, 16, 2, dropout=0.0, tie_weights=True).to(device)
    return model, (_tokens(), model.init_hidden(BATCH)), lambda m: torch.optim.SGD(m.parameters(), lr=0.5)


def transformer():
    model = TransformerModel(NTOKENS, 16, 2, 32, 2, dropout=0.0).to(device)
    return model, (_tokens(),), lambda m: torch.optim.AdamW(m.parameters(), lr=1e-3)
