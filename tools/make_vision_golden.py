#!/usr/bin/env python3
"""Golden outputs for the vision path (tests/vision), from reference pieces composed in Python.

Needs the tools venv (tools/.venv: torch, torchvision, timm, numpy, Pillow). Run after
tools/gen_tiny_vision.py; writes into tests/fixtures/vision/:

  *.png                 test images, made here deterministically (RGB, RGBA, palette)
  resize.safetensors    torchvision Resize(BICUBIC, antialias=True) on float planes: inputs and
                        outputs of a few up/down/mixed resizes, in full
  pos.safetensors       RADIO's CPE position embedding of the tiny checkpoint for 32x32 (every
                        4th row) and 5x8 patch grids (bilinear, align_corners=False, float32)
  <case>.safetensors    one per (image, tile budget): the grid, a hash of PIL's RGB decode, a
                        deterministic sample of the normalized tiles, and for the ViT cases the
                        ViT features (every 8th token) and the projector output (all rows)
  lm.safetensors        logits of the tiny checkpoint's language model for a prompt whose 256
                        `<image>` positions carry the square image's projector rows (model.md 4.8)
  golden-info.json      library versions and what each case is

Reference algorithm (model.md 4.1, NVIDIA image_processing.py / InternVL dynamic_preprocess):
PIL decode + convert("RGB"), ToTensor (uint8 / 255), grid by find_closest_aspect_ratio over the
Python-ordered candidate list, torchvision resize of the float tensor to the grid, row-major
512x512 tiles, thumbnail of the original appended when more than one tile, (x - mean) / std.

Vision tower (model.md 4.2-4.5): timm VisionTransformer blocks (pre-LN, eps 1e-6, fused qkv with
bias, exact GELU) loaded with the checkpoint's weights, RADIO's patch generator written out here
(Im2Patches (c, y, x) order, bias-free embedder, CPE pos_embed resize copied from RADIO's
ViTPatchGenerator._get_pos_embeddings eval branch as vLLM ships it, cls/register tokens in
front), no final norm, prefix tokens dropped. Then pixel_shuffle (vLLM/NVIDIA code, ps_version
v2) and mlp1 (RMSNorm eps 1e-5, Linear, ReLU^2, Linear). The tower runs in float64 so the
goldens are the exact math of the bf16-valued weights; the pixel input is the float32 tensor
torchvision produced, as the C code sees its own float32 tiles.

Splicing: inputs_embeds = E[ids] with the `<image>` positions replaced, in order, by the projector
rows, run through transformers' native NemotronHForCausalLM in float32 (loaded as
tools/make_lm_golden.py does, from tests/fixtures/models/tiny-mamba, whose weights are the
tiny-vlm language model's, checked here byte for byte).
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import PIL
import timm
import torch
import torch.nn.functional as F
import torchvision
import torchvision.transforms as T
from PIL import Image
from timm.models.vision_transformer import VisionTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_tiny_model as gtm  # noqa: E402
import gen_tiny_vision as gtv  # noqa: E402

torch.set_grad_enabled(False)


# ---- safetensors I/O ----------------------------------------------------------------------------

def write_safetensors(path, arrays, metadata):
    """arrays: dict name -> float array (stored F32)."""
    tensors = {n: gtm.Tensor("F32", np.asarray(a, dtype=np.float32)) for n, a in arrays.items()}
    gtm.write_safetensors(path, tensors, metadata)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = np.frombuffer(data[b:end], dtype="<u2" if e["dtype"] in ("BF16", "F16") else "<f4")
        if e["dtype"] == "BF16":
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        elif e["dtype"] == "F16":
            arr = raw.view(np.float16).astype(np.float32)
        else:
            arr = raw.astype(np.float32)
        out[name] = arr.reshape(e["shape"])
    return out


# ---- test images --------------------------------------------------------------------------------

def make_images(out):
    """Deterministic images with edges, gradients and noise (so the resize is exercised), kept
    compressible."""
    rng = np.random.default_rng(7)
    imgs = {}

    # 100x60 RGBA: gradients + checker + noise; the alpha channel must be dropped, not composited.
    h, w = 60, 100
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // (w - 1))
    g = (y * 255 // (h - 1))
    b = (((x // 7) + (y // 5)) % 2) * 200 + rng.integers(0, 56, (h, w))
    a = ((x + y) % 256).astype(np.uint8)
    rgba = np.stack([r, g, b, a], -1).astype(np.uint8)
    imgs["small"] = Image.fromarray(rgba, "RGBA")

    # 700x300 RGB: diagonal stripes, a disc, a noisy band.
    h, w = 300, 700
    y, x = np.mgrid[0:h, 0:w]
    r = ((np.sin((x + 2 * y) / 9.0) * 0.5 + 0.5) * 255)
    g = np.where((x - 350) ** 2 + (y - 150) ** 2 < 110 ** 2, 230, 30) + 0 * x
    b = (x * 255 // (w - 1)).astype(np.float64)
    band = (y > 200) & (y < 240)
    b = np.where(band, rng.integers(0, 256, (h, w)), b)
    rgb = np.stack([r, g, b], -1).clip(0, 255).astype(np.uint8)
    imgs["wide"] = Image.fromarray(rgb, "RGB")

    # 512x512 palette image (16 colours), blocks and rings: one tile, no thumbnail.
    h = w = 512
    y, x = np.mgrid[0:h, 0:w]
    idx = (((x // 37) * 3 + (y // 23)) + (np.hypot(x - 256, y - 256) // 40).astype(int)) % 16
    pal = rng.integers(0, 256, (16, 3)).astype(np.uint8)
    p = Image.fromarray(idx.astype(np.uint8), "P")
    p.putpalette(pal.reshape(-1).tolist())
    imgs["square"] = p

    # 1280x800 "screenshot": flat panels, a title bar, text-like dashes.
    h, w = 800, 1280
    img = np.full((h, w, 3), 236, np.uint8)
    img[0:32] = (40, 44, 52)
    img[32:800, 0:240] = (250, 250, 250)
    for k in range(40):
        yy = 60 + k * 18
        x0 = 260 + (k * 37) % 200
        img[yy:yy + 9, x0:x0 + 300 + (k * 53) % 500] = (30 + k, 30, 60)
    img[300:420, 600:900] = (66, 133, 244)
    img[340:380, 640:860] = (255, 255, 255)
    imgs["screen"] = Image.fromarray(img, "RGB")

    for name, im in imgs.items():
        im.save(os.path.join(out, name + ".png"), optimize=True)
    return sorted(imgs)


# ---- the reference image processor --------------------------------------------------------------

def target_ratios(max_num):
    s = set((i, j) for n in range(1, max_num + 1) for i in range(1, n + 1) for j in range(1, n + 1)
            if 1 <= i * j <= max_num)
    return sorted(s, key=lambda r: r[0] * r[1])


def find_closest_aspect_ratio(aspect_ratio, ratios, width, height, image_size):
    best_ratio_diff = float("inf")
    best_ratio = (1, 1)
    area = width * height
    for ratio in ratios:
        target_aspect_ratio = ratio[0] / ratio[1]
        ratio_diff = abs(aspect_ratio - target_aspect_ratio)
        if ratio_diff < best_ratio_diff:
            best_ratio_diff = ratio_diff
            best_ratio = ratio
        elif ratio_diff == best_ratio_diff:
            if area > 0.5 * image_size * image_size * ratio[0] * ratio[1]:
                best_ratio = ratio
    return best_ratio


def resize(img, h, w):
    return T.Resize((h, w), interpolation=T.InterpolationMode.BICUBIC, antialias=True)(img)


def preprocess(pil, image_size, max_num, use_thumbnail, mean, std):
    rgb = np.asarray(pil.convert("RGB"))
    x = torch.from_numpy(rgb.copy()).permute(2, 0, 1).contiguous().float().div(255)  # ToTensor
    h, w = x.shape[-2:]
    cols, rows = find_closest_aspect_ratio(w / h, target_ratios(max_num), w, h, image_size)
    big = resize(x, rows * image_size, cols * image_size)
    tiles = []
    for i in range(cols * rows):
        c0 = (i % cols) * image_size
        r0 = (i // cols) * image_size
        tiles.append(big[:, r0:r0 + image_size, c0:c0 + image_size])
    thumb = use_thumbnail and len(tiles) != 1
    if thumb:
        tiles.append(resize(x, image_size, image_size))
    px = torch.stack(tiles, 0)
    m = torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1)
    px = (px - m) / s
    return rgb, (cols, rows, int(thumb), px.shape[0]), px


def fnv1a64_chunks(data):
    hsh = 0xcbf29ce484222325
    for byte in data:
        hsh ^= byte
        hsh = (hsh * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return [(hsh >> (16 * k)) & 0xFFFF for k in range(4)]


# ---- the tiny RADIO + projector -----------------------------------------------------------------

class TinyRadio:
    def __init__(self, weights, v):
        self.v = v
        p = gtv.PREFIX
        self.emb = torch.from_numpy(weights[p + "patch_generator.embedder.weight"]).double()
        pos = torch.from_numpy(weights[p + "patch_generator.pos_embed"])  # float32 [1, G*G, D]
        self.pos = pos
        self.cls = torch.from_numpy(weights[p + "patch_generator.cls_token.token"]).double()
        self.n_prefix = self.cls.shape[0]
        self.rows = self.cols = v["pos_grid"]
        vit = VisionTransformer(img_size=v["tile"], patch_size=v["patch"], embed_dim=v["width"],
                                depth=v["depth"], num_heads=v["heads"], mlp_ratio=v["mlp"] / v["width"],
                                qkv_bias=True, class_token=True, num_classes=0)
        vit.norm = torch.nn.Identity()  # RADIO: model.norm = Identity unless args.model_norm
        sd = {}
        for name, arr in weights.items():
            if name.startswith(p + "blocks."):
                sd[name[len(p):]] = torch.from_numpy(arr.copy())
        missing, unexpected = vit.load_state_dict(sd, strict=False)
        assert not unexpected, unexpected
        assert all(not m.startswith("blocks.") for m in missing), missing
        for blk in vit.blocks:
            assert blk.norm1.eps == 1e-6 and blk.norm2.eps == 1e-6
            assert isinstance(blk.mlp.act, torch.nn.GELU) and blk.mlp.act.approximate == "none"
        self.blocks = vit.blocks.double().eval()
        self.mlp1_norm = torch.from_numpy(weights["mlp1.0.weight"]).double()
        self.mlp1_w1 = torch.from_numpy(weights["mlp1.1.weight"]).double()
        self.mlp1_w3 = torch.from_numpy(weights["mlp1.3.weight"]).double()

    def pos_embeddings(self, input_dims):
        """RADIO ViTPatchGenerator._get_pos_embeddings, eval branch, cpe_mode (vLLM radio.py)."""
        if (self.rows, self.cols) == tuple(input_dims):
            return self.pos
        pos_embed = self.pos.reshape(1, self.rows, self.cols, -1).permute(0, 3, 1, 2)

        def window_select(pe):
            if input_dims[0] < pe.shape[-2]:
                pe = pe[..., :input_dims[0], :]
            if input_dims[1] < pe.shape[-1]:
                pe = pe[..., :, :input_dims[1]]
            return pe

        max_dim = max(input_dims)
        pos_embed = F.interpolate(pos_embed.float(), size=(max_dim, max_dim), align_corners=False,
                                  mode="bilinear").to(pos_embed.dtype)
        pos_embed = window_select(pos_embed)
        if pos_embed.shape[-2:] != tuple(input_dims):
            pos_embed = F.interpolate(pos_embed.float(), size=input_dims, align_corners=False,
                                      mode="bilinear").to(pos_embed.dtype)
        return pos_embed.flatten(2).permute(0, 2, 1)

    def features(self, px):
        """px: [B, 3, H, W] float32 normalized tiles -> [B, N, D] float64 patch features."""
        ps = self.v["patch"]
        b, c, h, w = px.shape
        py, pxn = h // ps, w // ps
        x = px.double()
        patches = x.reshape(b, c, py, ps, pxn, ps).permute(0, 2, 4, 1, 3, 5).reshape(b, py * pxn, c * ps * ps)
        e = patches @ self.emb.T
        e = e + self.pos_embeddings((py, pxn)).double()
        seq = torch.cat([self.cls.unsqueeze(0).expand(b, -1, -1), e], 1)
        for blk in self.blocks:
            seq = blk(seq)
        return seq[:, self.n_prefix:]

    @staticmethod
    def pixel_shuffle(x, scale_factor=0.5):
        """NVIDIA modeling.py / vLLM nano_nemotron_vl.py, ps_version v2."""
        n, w, h, c = x.size()
        x = x.view(n, w, int(h * scale_factor), int(c / scale_factor))
        x = x.permute(0, 2, 1, 3).contiguous()
        x = x.view(n, int(h * scale_factor), int(w * scale_factor), int(c / (scale_factor * scale_factor)))
        x = x.permute(0, 2, 1, 3).contiguous()
        return x

    def project(self, feats):
        b, n, d = feats.shape
        hw = int(math.isqrt(n))
        x = feats.reshape(b, hw, hw, d)
        x = self.pixel_shuffle(x, 0.5)
        x = x.reshape(b, -1, x.shape[-1])
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + 1e-5) * self.mlp1_norm
        x = x @ self.mlp1_w1.T
        x = torch.relu(x) ** 2
        x = x @ self.mlp1_w3.T
        return x.reshape(-1, x.shape[-1])


# ---- main ---------------------------------------------------------------------------------------

RESIZE_CASES = [  # (channels, in_h, in_w, out_h, out_w)
    (2, 23, 37, 60, 100),    # upscale, non-integer
    (2, 60, 100, 23, 37),    # downscale, non-integer (antialias support 5.2 / 5.4)
    (1, 48, 64, 20, 64),     # height only (the width pass is skipped)
    (1, 300, 5, 7, 17),      # strong down + up
    (2, 41, 53, 96, 130),    # mixed scale factors
]

CASES = [  # (image, max_tiles, vit)
    ("small", 12, False),
    ("small", 2, True),
    ("wide", 12, False),
    ("square", 12, True),
    ("screen", 12, False),
]
N_SAMPLES = 3000
FEATURE_STRIDE = 8  # keep every 8th token of the ViT features
IMAGE_TOKEN = 250   # img_context_token_id of the tiny config
LM_PRE = [1, 17, 42, 99, 5, 251]          # text, then "<img>" (an ordinary id here)
LM_POST = [252, 10, 33, 77, 123, 9, 200]  # "</img>", then text


def lm_golden(out, weights, proj_rows):
    """Logits of the spliced prompt (one 1-tile image) from transformers' NemotronH."""
    import make_lm_golden as mlg
    from transformers import NemotronHForCausalLM  # noqa: F401  (import check)

    mamba_dir = os.path.join(HERE, "..", "tests", "fixtures", "models", "tiny-mamba")
    mamba = read_safetensors(os.path.join(mamba_dir, "model.safetensors"))
    lm_names = [n for n in weights if n.startswith("language_model.")]
    assert len(lm_names) == len(mamba)
    for n in lm_names:
        assert np.array_equal(weights[n], mamba[n[len("language_model."):]]), n
    model, _ = mlg.load_hf(mamba_dir)
    n_img = proj_rows.shape[0]
    ids = LM_PRE + [IMAGE_TOKEN] * n_img + LM_POST
    with torch.no_grad():
        emb = model.model.embeddings.weight[torch.tensor(ids)].clone()
        pos = [i for i, t in enumerate(ids) if t == IMAGE_TOKEN]
        emb[pos] = torch.from_numpy(proj_rows.astype(np.float32))
        logits = model(inputs_embeds=emb.unsqueeze(0), use_cache=False).logits[0].float().numpy()
    p0 = len(LM_PRE)
    rows = list(range(p0)) + [p0, p0 + 37, p0 + 128, p0 + n_img - 1] + list(range(p0 + n_img, len(ids)))
    return {
        "prompt": np.array(ids, np.float32),
        "logits_rows": np.array(rows, np.float32),
        "logits": logits[rows],
    }, transformers_version()


def transformers_version():
    import transformers
    return transformers.__version__


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "fixtures", "vision"))
    args = ap.parse_args(argv)
    out = os.path.normpath(args.out)
    model_dir = os.path.join(out, "tiny-vlm")
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.loads(f.read())
    with open(os.path.join(model_dir, "preprocessor_config.json")) as f:
        pcfg = json.load(f)
    weights = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    v = dict(gtv.VISION)
    tile = pcfg["image_size"]
    mean, std = pcfg["norm_mean"], pcfg["norm_std"]
    versions = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "timm": timm.__version__,
        "numpy": np.__version__,
        "pillow": PIL.__version__,
    }
    meta = {"generator": "tools/make_vision_golden.py", **versions}
    info = {"versions": versions, "resize": [], "cases": []}

    # Generic resizes.
    rng = np.random.default_rng(11)
    arrays = {}
    for k, (c, ih, iw, oh, ow) in enumerate(RESIZE_CASES):
        src = (rng.standard_normal((c, ih, iw)) * 0.7 + 0.3).astype(np.float32)
        dst = resize(torch.from_numpy(src), oh, ow).numpy()
        arrays[f"case{k}.in"] = src
        arrays[f"case{k}.out"] = dst
        info["resize"].append({"case": k, "channels": c, "in": [ih, iw], "out": [oh, ow]})
    write_safetensors(os.path.join(out, "resize.safetensors"), arrays, meta)

    radio = TinyRadio(weights, v)

    # Position embeddings.
    write_safetensors(os.path.join(out, "pos.safetensors"), {
        "pos.32x32.rows": np.arange(0, 32 * 32, 4, dtype=np.float32),
        "pos.32x32": radio.pos_embeddings((32, 32))[0, ::4].numpy(),
        "pos.5x8": radio.pos_embeddings((5, 8))[0].numpy(),
    }, meta)

    names = make_images(out)
    assert set(n for n, _, _ in CASES) <= set(names)
    for name, max_tiles, vit in CASES:
        pil = Image.open(os.path.join(out, name + ".png"))
        rgb, grid, px = preprocess(pil, tile, max_tiles, True, mean, std)
        srng = np.random.default_rng(sum(map(ord, name)) * 131 + max_tiles)
        n, c, h, w = px.shape
        idx = np.stack([srng.integers(0, n, N_SAMPLES), srng.integers(0, c, N_SAMPLES),
                        srng.integers(0, h, N_SAMPLES), srng.integers(0, w, N_SAMPLES)], 1)
        vals = px.numpy()[idx[:, 0], idx[:, 1], idx[:, 2], idx[:, 3]]
        arrays = {
            "grid": np.array(grid, np.float32),
            "size": np.array([rgb.shape[1], rgb.shape[0]], np.float32),
            "rgb_fnv1a64": np.array(fnv1a64_chunks(rgb.tobytes()), np.float32),
            "sample_idx": idx.astype(np.float32),
            "sample_val": vals,
        }
        entry = {"case": f"{name}-t{max_tiles}", "image": name + ".png", "mode": pil.mode,
                 "size": [rgb.shape[1], rgb.shape[0]], "max_tiles": max_tiles,
                 "grid": {"cols": grid[0], "rows": grid[1], "thumbnail": bool(grid[2]), "n_tiles": grid[3]}}
        if vit:
            feats = radio.features(px)
            arrays["feature_rows"] = np.arange(0, feats.shape[1], FEATURE_STRIDE, dtype=np.float32)
            arrays["features"] = feats[:, ::FEATURE_STRIDE].numpy()
            arrays["projector"] = radio.project(feats).numpy()
            entry["vit"] = {"features": list(feats.shape), "projector": list(arrays["projector"].shape)}
            if name == "square":
                lm_arrays, tv = lm_golden(out, weights, arrays["projector"])
                versions["transformers"] = tv
                write_safetensors(os.path.join(out, "lm.safetensors"), lm_arrays, dict(meta, transformers=tv))
                info["lm"] = {"image": "square.png", "prompt_len": int(lm_arrays["prompt"].shape[0]),
                              "image_token": IMAGE_TOKEN, "rows": lm_arrays["logits_rows"].astype(int).tolist()}
        write_safetensors(os.path.join(out, f"{name}-t{max_tiles}.safetensors"), arrays, meta)
        info["cases"].append(entry)

    with open(os.path.join(out, "golden-info.json"), "w") as f:
        f.write(json.dumps(info, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
