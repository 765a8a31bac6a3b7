"""A PopTorch-style training loop that logs into the ipu run store.

The plan is examples/tiny_bert.ipu's last phase, `long` (a 2-layer BERT:
hidden 64, 2 heads, FFN 256, vocabulary 1000, sequences of 64 tokens with
10 masked, a global batch of 16); the last because `ipu runs compare` sets
the estimate's latest figure (its last phase's) beside the run's. The loop
trains a PyTorch model of that shape on a small fixed set of random tokens
and records loss and throughput with ipu.start_run, beside the cost model's
estimate of the same plan, so `ipu runs compare` sets predicted against
measured.

THE MODEL RUNS ON THIS MACHINE'S CPU, standing in for the IPU: its
throughput is the CPU's, not an IPU's, and the comparison shows only how the
calls fit together. On an IPU the model would be wrapped with
poptorch.trainingModel(model, options, optimizer) and the loop would be the
same: the model returns its loss, one call runs one step.

    PYTHONPATH=build/python python3 examples/python_training_loop.py --store /tmp/ipu.db
    ipu runs compare ESTIMATE_ID RUN_ID --store /tmp/ipu.db   (the ids it prints)
"""

import argparse
import os
import time

import torch
from torch import nn

import ipu

HERE = os.path.dirname(os.path.abspath(__file__))


class TinyBert(nn.Module):
    """The script's model: embeddings, a 2-layer encoder and the MLM head.
    As with PopTorch, forward() returns the loss so one call is one step."""

    def __init__(self, vocab=1000, hidden=64, heads=2, ffn=256, layers=2, positions=128):
        super().__init__()
        self.tokens = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(positions, hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.mlm = nn.Linear(hidden, vocab)

    def forward(self, ids, masked_positions, masked_labels):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
        h = self.encoder(x)
        picked = torch.gather(h, 1, masked_positions.unsqueeze(-1).expand(-1, -1, h.shape[-1]))
        logits = self.mlm(picked)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), masked_labels.reshape(-1))


def batch(size, seq_len, masked, vocab=1000):
    ids = torch.randint(0, vocab, (size, seq_len))
    positions = torch.stack([torch.randperm(seq_len)[:masked] for _ in range(size)])
    labels = torch.gather(ids, 1, positions)
    ids = ids.scatter(1, positions, 0)  # token 0 stands for [MASK]
    return ids, positions, labels


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default=os.path.join(HERE, "tiny_bert.ipu"))
    parser.add_argument("--store", default=None, help="a path or postgresql:// URI (default: $IPU_STORE, else runs/ipu.db)")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(1234)

    script = ipu.load(args.script)
    # What the plan says: the phase's batch, and the cost model's estimate, recorded.
    phase = script.plan()["runs"][0]["phases"][-1]
    global_batch = phase["global_batch"]
    estimate = script.estimate(store=args.store)
    predicted = estimate["runs"][0]["phases"][-1]["throughput_samples_per_s"]

    model = TinyBert()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.005, weight_decay=0.01)
    # A small fixed data set, read again each epoch, so that the loss falls
    # within a few steps (random tokens every step would leave nothing to learn).
    data = [batch(global_batch, phase["seq_len"], phase["masked_tokens"]) for _ in range(2)]
    # On an IPU: model = poptorch.trainingModel(model, options, optimizer)

    with ipu.start_run(script, phase=phase["name"], store=args.store,
                       parameters={"device": "cpu (stands in for an IPU)"}) as run:
        for step in range(1, args.steps + 1):
            ids, positions, labels = data[step % len(data)]
            start = time.perf_counter()
            optimizer.zero_grad()
            loss = model(ids, positions, labels)
            loss.backward()
            optimizer.step()
            seconds = time.perf_counter() - start
            run.log(step, loss=loss.item(), samples_per_s=global_batch / seconds, step_time_s=seconds)

    measured = ipu.Store(args.store).run(run.id)["metrics"]["samples_per_s"]
    print(f"estimate {estimate['recorded'][0]}: {predicted:,.0f} samples/s predicted on the IPU plan")
    print(f"run {run.id}: {measured['last']:,.0f} samples/s measured on this CPU (not an IPU)")
    print(f"compare: ipu runs compare {estimate['recorded'][0]} {run.id} --store {run.store}")


if __name__ == "__main__":
    main()
