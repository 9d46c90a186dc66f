#!/usr/bin/python3
"""Exports the models wpk's demo and tests use, from Debian's torch/torchvision, with fixed
seeds and random weights (no download): ONNX opset 17 with a dynamic batch dimension, plus one
PyTorch reference input/output pair per model (two for gated_residual, one per branch; three
outputs for ssdlite: boxes, scores, labels) in the ONNX test-data layout:

    OUT/<name>.onnx
    OUT/<name>/test_data_set_0/input_0.pb, output_0.pb

Usage: export_models.py OUT_DIR [name ...]
  names: resnet18 resnet50 mobilenet_v2 bert_base densenet121 squeezenet1_1 inception_v3
         efficientnet_b0 vit_small gpt2_small greedy_decoder gated_residual ssdlite (default: all)
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


class GPT2Block(torch.nn.Module):
    """One pre-norm GPT-2 decoder block: causal self-attention and a tanh-GELU MLP."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)  # GPT-2's c_attn
        self.proj = torch.nn.Linear(hidden, hidden)
        self.ln2 = torch.nn.LayerNorm(hidden)
        self.fc = torch.nn.Linear(hidden, 4 * hidden)
        self.fc_proj = torch.nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        n, s, h = x.shape
        d = h // self.heads
        q, k, v = (t.view(n, s, self.heads, d).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(h, dim=2))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (d ** 0.5)
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool, device=x.device))
        scores = scores.masked_fill(~causal, float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v).transpose(1, 2).reshape(n, s, h)
        x = x + self.proj(ctx)
        return x + self.fc_proj(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT2Decoder(torch.nn.Module):
    """A small GPT-2-style causal decoder: vocab 1000, 2 layers, hidden 128, 4 heads, seq 32,
    final LayerNorm and an LM head tied to the token embedding."""

    def __init__(self, vocab=1000, hidden=128, heads=4, layers=2, seq=32):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, hidden)
        self.wpe = torch.nn.Embedding(seq, hidden)
        self.blocks = torch.nn.ModuleList([GPT2Block(hidden, heads) for _ in range(layers)])
        self.ln_f = torch.nn.LayerNorm(hidden)
        # Embeddings N(0, 0.02) as GPT-2 inits them; linear weights N(0, 0.1), not 0.02, so the
        # GELU's tanh form matters (exact GELU in its place moves the logits by 2e-4 relative L2,
        # 5e-5 at 0.02); small random biases so every bias path counts.
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, torch.nn.Embedding):
                    m.weight.normal_(0.0, 0.02)
                if isinstance(m, torch.nn.Linear):
                    m.weight.normal_(0.0, 0.1)
                    m.bias.uniform_(-0.02, 0.02)

    def forward(self, input_ids):
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.wte(input_ids) + self.wpe(positions)
        for block in self.blocks:
            x = block(x)
        return torch.nn.functional.linear(self.ln_f(x), self.wte.weight)  # tied LM head


class GreedyDecoder(torch.nn.Module):
    """A small recurrent language model that reads a prompt and then generates `steps` tokens
    greedily, each fed back as the next input; returns every generated step's logits
    [N, steps, vocab]. Scripted, so both loops export as ONNX Loop nodes, the second carrying
    logits that grow by one step per iteration."""

    def __init__(self, vocab: int = 50, hidden: int = 32):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.inp = torch.nn.Linear(hidden, hidden)
        self.rec = torch.nn.Linear(hidden, hidden, bias=False)
        self.head = torch.nn.Linear(hidden, vocab)
        self.hidden = hidden
        self.vocab = vocab

    def forward(self, prompt: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(prompt.shape[0], self.hidden)
        for i in range(prompt.shape[1]):
            h = torch.tanh(self.inp(self.embed(prompt[:, i])) + self.rec(h))
        token = self.head(h).argmax(dim=1)
        logits = torch.zeros(prompt.shape[0], 0, self.vocab)
        for _ in range(int(steps)):
            h = torch.tanh(self.inp(self.embed(token)) + self.rec(h))
            step = self.head(h)
            logits = torch.cat([logits, step.unsqueeze(1)], dim=1)
            token = step.argmax(dim=1)
        return logits


class GatedResidual(torch.nn.Module):
    """Takes one of two different branches on the sign of the input's sum: an ONNX If."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            y = torch.relu(self.a(x))
        else:
            y = torch.tanh(self.b(x)) * 2
        return y + x


# Exported from TorchScript (torch.jit.script), so Python control flow becomes ONNX control flow.
SCRIPTED = {"greedy_decoder", "gated_residual"}
# Models with several outputs: their names, in order (the others have one, "output").
OUTPUTS = {"ssdlite": ["boxes", "scores", "labels"]}


def ssdlite():
    """SSDlite320 (MobileNetV3-Large) with its post-processing (score threshold, per-class NMS,
    top detections). Convolutions He-initialised so features neither vanish nor saturate, and a
    classification head whose scores differ from anchor to anchor: with the default init every
    score is 1/91 and which tied box comes first is arbitrary. The input is a smooth synthetic
    image [3, 320, 320]."""
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None,
                                                                       num_classes=91)
    with torch.no_grad():
        for m in model.backbone.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
        for m in model.head.classification_head.modules():
            if isinstance(m, torch.nn.Conv2d):
                m.weight.normal_(0, 0.05)
                if m.bias is not None:
                    m.bias.uniform_(-2, 2)
    model.score_thresh = 0.2
    model.detections_per_img = 10
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 320), torch.linspace(0, 1, 320), indexing="ij")
    image = torch.stack([torch.sin(6 * xx + 3 * yy), torch.cos(5 * yy - 2 * xx), xx * yy]) * 0.5 + 0.5
    image = image + 0.05 * torch.rand(3, 320, 320, generator=torch.Generator().manual_seed(1))
    return model, image


def randomise_norms(model):
    """Default inits leave BatchNorm and LayerNorm at identity; randomise their statistics and
    affine parameters so folding and fusing them is really tested."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
            if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)


def build(name):
    torch.manual_seed(0)
    if name == "bert_base":
        model = BertEncoder()
        gen = torch.Generator().manual_seed(1)
        ids = torch.randint(0, 30522, (1, 128), generator=gen)
        mask = torch.ones(1, 128, dtype=torch.int64)
        mask[:, 100:] = 0  # padded tail, so the mask path matters
        return model, (ids, mask), ["input_ids", "attention_mask"], {"input_ids": {0: "N"}, "attention_mask": {0: "N"}}
    if name == "gpt2_small":
        model = GPT2Decoder()
        randomise_norms(model)
        ids = torch.randint(0, 1000, (1, 32), generator=torch.Generator().manual_seed(1))
        return model, (ids,), ["input_ids"], {"input_ids": {0: "N"}}
    if name == "ssdlite":
        model, image = ssdlite()
        return model, (image,), ["images"], {}
    if name == "greedy_decoder":
        prompt = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
        return GreedyDecoder(), (prompt, torch.tensor(6)), ["prompt", "steps"], {"prompt": {0: "N", 1: "T"}}
    if name == "gated_residual":
        # Its first data set takes the else branch; test_data_set_1 (export) the other.
        x = torch.randn(3, 16, generator=torch.Generator().manual_seed(1))
        return GatedResidual(), (x - x.mean() - 0.1,), ["x"], {"x": {0: "N"}}
    size = 224
    if name == "vit_small":
        model = torchvision.models.vision_transformer.VisionTransformer(
            image_size=224, patch_size=16, num_layers=2, num_heads=3, hidden_dim=192, mlp_dim=768, num_classes=1000)
        with torch.no_grad():  # torchvision zero-initialises the head and the class token
            model.heads.head.reset_parameters()
            model.class_token.normal_(0.0, 0.02)
    elif name == "inception_v3":
        model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
        size = 299
        # Its init (convolutions N(0, 0.1)) grows activations ~1e13-fold by the logits, which would
        # drown every bias; He init keeps them in range (logits' std ~60).
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
    else:
        model = getattr(torchvision.models, name)(weights=None)
    randomise_norms(model)
    image = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    return model, (image,), ["input"], {"input": {0: "N"}}


# Every model is exported by default (scripts/test.sh, CI): about 25 s and 860 MB in all.
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "bert_base", "densenet121", "squeezenet1_1", "inception_v3",
          "efficientnet_b0", "vit_small", "gpt2_small", "greedy_decoder", "gated_residual", "ssdlite"]


def write_data_set(data_dir, inputs, outputs):
    os.makedirs(data_dir, exist_ok=True)
    for i, t in enumerate(inputs):
        with open(os.path.join(data_dir, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(t.numpy()).SerializeToString())
    for i, t in enumerate(outputs):
        a = t.numpy()
        with open(os.path.join(data_dir, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(a.astype(np.float32) if a.dtype.kind == "f" else a).SerializeToString())


def export_kwargs():
    # Newer PyTorch exports through dynamo by default; the TorchScript exporter writes the graphs
    # the fixtures were made with.
    import inspect
    return {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}


def export(name, out_dir):
    path = os.path.join(out_dir, name + ".onnx")
    data_dir = os.path.join(out_dir, name, "test_data_set_0")
    if os.path.exists(path) and os.path.exists(os.path.join(data_dir, "output_0.pb")):
        return
    model, inputs, input_names, dynamic = build(name)
    model.eval()
    if name in SCRIPTED:
        model = torch.jit.script(model)
    output_names = OUTPUTS.get(name, ["output"])
    tmp = path + ".tmp"
    if name in OUTPUTS:  # a detector: a list of images in, a dict per image out
        with torch.no_grad():
            found = model(list(inputs))[0]
        expected = [found[k] for k in output_names]
        torch.onnx.export(model, (list(inputs),), tmp, opset_version=17, input_names=input_names,
                          output_names=output_names, do_constant_folding=True, **export_kwargs())
    else:
        with torch.no_grad():
            expected = [model(*inputs)]
        torch.onnx.export(model, inputs, tmp, opset_version=17, input_names=input_names, output_names=output_names,
                          dynamic_axes={**dynamic, "output": {0: "N"}}, do_constant_folding=True, **export_kwargs())
    onnx.checker.check_model(tmp)
    write_data_set(data_dir, inputs, expected)
    if name == "gated_residual":
        with torch.no_grad():
            write_data_set(os.path.join(out_dir, name, "test_data_set_1"), (-inputs[0],), [model(-inputs[0])])
    os.replace(tmp, path)  # last, so an interrupted export is redone
    print("exported", path)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    if sys.argv[1].startswith("-"):
        sys.exit("unknown option %s (usage: export_models.py OUT_DIR [name ...])" % sys.argv[1])
    out_dir = sys.argv[1]
    names = sys.argv[2:] or MODELS
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit("unknown model(s): %s (known: %s)" % (" ".join(unknown), " ".join(MODELS)))
    os.makedirs(out_dir, exist_ok=True)
    torch.set_num_threads(2)
    for name in names:
        export(name, out_dir)


if __name__ == "__main__":
    main()
