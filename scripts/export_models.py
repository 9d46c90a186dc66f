#!/usr/bin/python3
"""Exports the models wpk's demo and tests use, from Debian's torch/torchvision, with fixed
seeds and random weights (no download): ONNX opset 17 with a dynamic batch dimension, plus one
PyTorch reference input/output pair per model in the ONNX test-data layout:

    OUT/<name>.onnx
    OUT/<name>/test_data_set_0/input_0.pb, output_0.pb

Usage: export_models.py OUT_DIR [name ...]     (names: resnet18 resnet50 mobilenet_v2 bert_base)
A model already exported is left alone, so this is cheap to call again.
"""
import os
import sys

import numpy as np
import onnx
import torch
import torchvision
from onnx import numpy_helper


class BertLayer(torch.nn.Module):
    """One post-norm BERT encoder layer written out op by op, as BERT exporters produce it."""

    def __init__(self, hidden, heads, ff):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.ModuleList([torch.nn.Linear(hidden, hidden) for _ in range(3)])
        self.out = torch.nn.Linear(hidden, hidden)
        self.norm1 = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = torch.nn.Linear(hidden, ff)
        self.ff2 = torch.nn.Linear(ff, hidden)
        self.norm2 = torch.nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask):
        n, s, h = x.shape
        d = h // self.heads
        q, k, v = (lin(x).view(n, s, self.heads, d).transpose(1, 2) for lin in self.qkv)
        scores = torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5) + mask
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(n, s, h)
        x = self.norm1(x + self.out(ctx))
        return self.norm2(x + self.ff2(torch.nn.functional.gelu(self.ff1(x))))


class BertEncoder(torch.nn.Module):
    """BERT-base shaped: vocab 30522, hidden 768, 12 heads, 12 layers, FF 3072, seq 128."""

    def __init__(self, vocab=30522, hidden=768, heads=12, layers=12, ff=3072, seq=128):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, hidden)
        self.pos = torch.nn.Embedding(seq, hidden)
        self.norm = torch.nn.LayerNorm(hidden, eps=1e-12)
        self.layers = torch.nn.ModuleList([BertLayer(hidden, heads, ff) for _ in range(layers)])

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(positions))
        mask = (1.0 - attention_mask.to(torch.float32))[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x


def build(name):
    torch.manual_seed(0)
    if name == "bert_base":
        model = BertEncoder()
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 30522, (1, 128), generator=gen)
        mask = torch.ones(1, 128, dtype=torch.int64)
        mask[:, 100:] = 0  # padded tail, so the mask path matters
        return model, (ids, mask), ["input_ids", "attention_mask"], {"input_ids": {0: "N"}, "attention_mask": {0: "N"}}
    model = getattr(torchvision.models, name)(weights=None)
    # torchvision's default init leaves BatchNorm at identity; randomise its statistics so
    # folding BatchNorm is really tested.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    image = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return model, (image,), ["input"], {"input": {0: "N"}}


def export(name, out_dir):
    path = os.path.join(out_dir, name + ".onnx")
    data_dir = os.path.join(out_dir, name, "test_data_set_0")
    if os.path.exists(path) and os.path.exists(os.path.join(data_dir, "output_0.pb")):
        return
    model, inputs, input_names, dynamic = build(name)
    model.eval()
    with torch.no_grad():
        expected = model(*inputs)
    tmp = path + ".tmp"
    torch.onnx.export(model, inputs, tmp, opset_version=17, input_names=input_names, output_names=["output"],
                      dynamic_axes={**dynamic, "output": {0: "N"}}, do_constant_folding=True)
    onnx.checker.check_model(tmp)
    os.makedirs(data_dir, exist_ok=True)
    for i, t in enumerate(inputs):
        with open(os.path.join(data_dir, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy()).SerializeToString())
    with open(os.path.join(data_dir, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(expected.numpy().astype(np.float32)).SerializeToString())
    os.replace(tmp, path)  # last, so an interrupted export is redone
    print("exported", path)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    names = sys.argv[2:] or ["resnet18", "resnet50", "mobilenet_v2", "bert_base"]
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(2)
    for name in names:
        export(name, out_dir)


if __name__ == "__main__":
    main()
