"""Library warm-ups run by the fork server once it has imported what workers need, before it forks any worker.

The first call of much of torch (an optimizer's step, a GRU, autograd through a softmax) and of transformers (a
model's construction and forward) does one-time work: lazy imports, dispatch and docstring caches, kernels looked
up. A worker forked from a fork server that never made those calls pays for them again, in every worker, some tens
of milliseconds a submission. Here the fork server makes them once, on tiny tensors, with library code only.

Guarantees: only library code runs (nothing of a course, the release or the tests: the fork server holds none of
it); CUDA is never touched (a process that initialised CUDA cannot fork usable children); the random number
generators of torch, `random` and numpy are left exactly as they were, so a worker starts from the same state with
or without a warm-up; no thread is left running; a warm-up that fails is skipped without a word (it only saves
time).
"""
from __future__ import annotations

import contextlib
import gc
import random
import sys
import warnings

_DONE: set[str] = set()


def warm_libraries() -> list[str]:
    """Run the warm-up of each loaded library that has one and has not had it yet; returns their names."""
    ran = []
    for name, recipe in (("torch", _torch), ("transformers", _transformers)):
        if name in _DONE or name not in sys.modules:
            continue
        _DONE.add(name)
        try:
            with _random_states_kept(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                recipe()
            ran.append(name)
        except Exception:  # noqa: BLE001 - a warm-up only saves time: whatever fails here, workers do it themselves
            continue
    gc.collect()  # the warm-up's own cycles (modules, optimizers), before the fork server freezes what it holds
    return ran


@contextlib.contextmanager
def _random_states_kept():
    import torch

    numpy = sys.modules.get("numpy")
    saved = (torch.random.get_rng_state(), random.getstate(), numpy.random.get_state() if numpy else None)
    try:
        yield
    finally:
        torch.random.set_rng_state(saved[0])
        random.setstate(saved[1])
        if numpy is not None:
            numpy.random.set_state(saved[2])


def _torch() -> None:
    """The calls a deep-learning notebook and its checks make most: layers, losses, autograd, optimizers,
    schedulers, a DataLoader, seeded generators, state dicts."""
    import copy

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 5, 8, generator=g)
    ids = torch.randint(0, 10, (2, 5), generator=g)
    mask = torch.rand(2, 5, generator=g) < 0.3  # (B, T)
    emb, lin, norm = nn.Embedding(10, 8), nn.Linear(8, 8), nn.LayerNorm(8)
    ffn = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8), nn.Dropout(0.1))
    gru = nn.GRU(8, 4, num_layers=2, batch_first=True, bidirectional=True, dropout=0.1)
    lstm = nn.LSTM(8, 4, batch_first=True)
    conv = nn.Sequential(nn.Conv1d(8, 8, 3, padding=1), nn.BatchNorm1d(8), nn.ReLU())
    modules = nn.ModuleList([emb, lin, norm, ffn, gru, lstm, conv])

    def loss_of() -> torch.Tensor:
        h = norm(emb(ids) + x)  # (B, T, E)
        scores = (lin(h) @ h.transpose(-2, -1)) / 8 ** 0.5  # (B, T, T)
        weights = torch.softmax(scores.masked_fill(mask[:, None, :], float("-inf")), dim=-1)
        h = h + F.dropout(weights, 0.1, training=True) @ ffn(h)
        h = h + F.scaled_dot_product_attention(h[:, None], h[:, None], h[:, None]).squeeze(1)
        h = h + conv(h.transpose(1, 2)).transpose(1, 2)
        out, last = gru(torch.tanh(h))  # (B, T, 2 * 4), (2 * 2, B, 4)
        out2, _ = lstm(torch.relu(h))
        logits = out.reshape(-1, 8)  # (B * T, 8)
        targets = ids.reshape(-1) % 8  # (B * T,)
        return (F.cross_entropy(logits, targets, ignore_index=-100) + F.mse_loss(out2, torch.zeros_like(out2))
                + nn.BCEWithLogitsLoss()(last[-1].sum(-1), torch.ones(2))
                - F.log_softmax(logits, -1).gather(1, targets[:, None]).mean())

    for opt in (torch.optim.SGD(modules.parameters(), lr=0.1, momentum=0.9),
                torch.optim.Adam(modules.parameters(), lr=1e-3),
                torch.optim.AdamW(modules.parameters(), lr=1e-3, weight_decay=0.01)):
        opt.zero_grad()
        loss_of().backward()
        nn.utils.clip_grad_norm_(modules.parameters(), 1.0)
        opt.step()
        torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0).step()
    modules.eval()
    with torch.no_grad():
        (ids == 3).nonzero()
        torch.bernoulli(torch.full((2, 5), 0.5), generator=g).bool().sum()
        ids.unique(return_counts=True)
        torch.multinomial(torch.ones(10), 3, generator=g)
        torch.stack([ids, ids]).float().mean(), torch.cat([ids, ids], 1).argmax(-1), torch.einsum("bij,bjk->bik", x, x.transpose(1, 2))
    copy.deepcopy(modules).load_state_dict(modules.state_dict())
    for _ in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, ids), batch_size=1, shuffle=True):
        pass
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)


def _transformers() -> None:
    """A tiny BERT built from a configuration (no download), forward and backward with an attention mask: the
    model machinery every transformers model shares."""
    import transformers

    if "transformers.models.bert.modeling_bert" not in sys.modules:
        return  # the workers' code does not use BERT: nothing of it is imported for them
    import torch

    config = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=16, max_position_embeddings=16)
    model = transformers.BertModel(config)
    ids = torch.randint(0, 20, (2, 6))
    out = model(input_ids=ids, attention_mask=torch.ones(2, 6, dtype=torch.long))
    out.last_hidden_state.sum().backward()
    model.eval()
    with torch.no_grad():
        model(ids)
