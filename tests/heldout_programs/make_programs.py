"""Writes the held-out programs of tests/heldout_programs/ as iree-turbine's ``aot.export`` writes PyTorch
programs (``module @module``, ``torch.vtensor``/``torch.aten.*`` ops, ``torch.constant.*`` operands, weights
as ``dense_resource`` blobs in ``util.global``s and ``torch.vtensor.literal``s, rank-0 parameters, symbolic
batch sizes), with their inputs (``*_x*.npy``, numpy seed 0) and the outputs numpy computes for them
independently of IREE (``*_expected.npz``, in result order: a framework's golden outputs).

Run it again to regenerate (``python tests/heldout_programs/make_programs.py``); the files are committed.

- ``depthwise_cnn``: conv (batch norm folded into its weights) + relu, depthwise conv, batch norm as
  PyTorch decomposes it (mean/var/weight/bias literals, rsqrt, unsqueeze), relu, avg-pool, a rank-0
  scale parameter, flatten, linear, division by a rank-0 temperature argument, softmax; and a rank-0
  second result (the sum of the logits).
- ``reduction_chain``: sum -> mean -> variance -> layer-norm-like normalisation over the last axis, a sum
  over the middle axis, an integer argmax (si64) over the last, a max over the first, and a rank-0 total.
- ``se_resnet``: conv + relu, max-pool with padding, a residual block (3x3 and 1x1 branches, add),
  squeeze-and-excitation (mean, 1x1 convs, sigmoid, multiply), concatenation, hardswish, global average
  pool, view, linear, log-softmax.
- ``masked_embedding``: token ids (si64) and an attention mask (i1) in, embedding, masked mean, and a
  boolean result.
- ``dynamic_mlp``: a two-layer MLP with a symbolic batch size (``torch.symbolic_int``,
  ``torch.bind_symbolic_shape``), tanh and log-softmax.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


class Blobs:
    """``dense_resource`` blobs as IREE's MLIR writes them: ``0x`` + the alignment (u32 LE) + the bytes."""

    def __init__(self) -> None:
        self.blobs: dict[str, np.ndarray] = {}

    def add(self, name: str, array: np.ndarray) -> str:
        self.blobs[name] = np.ascontiguousarray(array, np.float32)
        return name

    def text(self) -> str:
        lines = [f'      {name}: "0x04000000{a.astype("<f4").tobytes().hex().upper()}"' for name, a in self.blobs.items()]
        return "{-#\n  dialect_resources: {\n    builtin: {\n" + ",\n".join(lines) + "\n    }\n  }\n#-}\n"


def vt(shape, dtype: str = "f32") -> str:
    return f"!torch.vtensor<[{','.join(str(d) for d in shape)}],{dtype}>"


def tt(shape) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f32>"


class Body:
    """A function body with iree-turbine's habits: every int operand its own ``torch.constant.int``."""

    def __init__(self, blobs: Blobs) -> None:
        self.lines: list[str] = []
        self.n = 0
        self.k = 0
        self.blobs = blobs

    def emit(self, text: str) -> str:
        name = f"%{self.n}"
        self.n += 1
        self.lines.append(f"    {name} = {text}")
        return name

    def const_int(self, value: int) -> str:
        self.k += 1
        name = f"%int{value}_{self.k}".replace("-", "m")
        self.lines.append(f"    {name} = torch.constant.int {value}")
        return name

    def const(self, kind: str, text: str) -> str:
        self.k += 1
        name = f"%{kind}_{self.k}"
        self.lines.append(f"    {name} = torch.constant.{kind} {text}")
        return name

    def none(self) -> str:
        self.k += 1
        self.lines.append(f"    %none_{self.k} = torch.constant.none")
        return f"%none_{self.k}"

    def ints(self, *values: int) -> str:
        names = [self.const_int(v) for v in values]
        types = ", ".join("!torch.int" for _ in names)
        return self.emit(f"torch.prim.ListConstruct {', '.join(names)} : ({types}) -> !torch.list<int>")

    def literal(self, name: str, array: np.ndarray) -> str:
        self.blobs.add(name, array)
        return self.emit(f"torch.vtensor.literal(dense_resource<{name}> : {tt(array.shape)}) : {vt(array.shape)}")


def conv2d(b: Body, x: str, xs, w: str, ws, bias: str, bias_type: str, stride: int, pad: int, groups: int, out) -> str:
    s, p, d = b.ints(stride, stride), b.ints(pad, pad), b.ints(1, 1)
    g = b.const_int(groups)
    return b.emit(f"torch.aten.conv2d {x}, {w}, {bias}, {s}, {p}, {d}, {g} : {vt(xs)}, {vt(ws)}, {bias_type}, "
                  f"!torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.int -> {vt(out)}")


def unsqueeze2(b: Body, v: str, c: int) -> str:
    one = b.emit(f"torch.aten.unsqueeze {v}, {b.const_int(-1)} : {vt([c])}, !torch.int -> {vt([c, 1])}")
    return b.emit(f"torch.aten.unsqueeze {one}, {b.const_int(-1)} : {vt([c, 1])}, !torch.int -> {vt([c, 1, 1])}")


def np_conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, stride: int, pad: int, groups: int) -> np.ndarray:
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
        if bias is not None:
            out[:, oc] += bias[oc]
    return out


def depthwise_cnn(rng: np.random.Generator) -> None:
    blobs = Blobs()
    b = Body(blobs)
    w0 = (rng.standard_normal((8, 3, 3, 3)) * 0.4).astype(np.float32)
    b0 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    wd = (rng.standard_normal((8, 1, 3, 3)) * 0.5).astype(np.float32)
    mean, var = (rng.standard_normal(8) * 0.2).astype(np.float32), rng.uniform(0.5, 2.0, 8).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 8).astype(np.float32), (rng.standard_normal(8) * 0.1).astype(np.float32)
    scale = np.array(1.25, np.float32)
    wl = (rng.standard_normal((10, 128)) * 0.1).astype(np.float32)
    bl = (rng.standard_normal(10) * 0.1).astype(np.float32)
    x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
    temperature = np.array(1.7, np.float32)

    blobs.add("__auto.stem.0.weight", w0)
    b.lines.append(f"    %stem_w = util.global.load @__auto.stem.0.weight : {tt(w0.shape)}")
    w0v = b.emit(f"torch_c.from_builtin_tensor %stem_w : {tt(w0.shape)} -> {vt(w0.shape)}")
    b0v = b.literal("torch_tensor_8_torch.float32", b0)
    c0 = conv2d(b, "%arg0", x.shape, w0v, w0.shape, b0v, vt([8]), 1, 1, 1, (1, 8, 16, 16))
    r0 = b.emit(f"torch.aten.relu {c0} : {vt((1, 8, 16, 16))} -> {vt((1, 8, 16, 16))}")
    wdv = b.literal("torch_tensor_8_1_3_3_torch.float32", wd)
    none = b.none()
    c1 = conv2d(b, r0, (1, 8, 16, 16), wdv, wd.shape, none, "!torch.none", 2, 1, 8, (1, 8, 8, 8))
    # Batch norm in eval mode, as torch's decomposition writes it.
    mv = b.literal("torch_tensor_8_torch.float32_1", mean)
    vv = b.literal("torch_tensor_8_torch.float32_2", var)
    gv = b.literal("torch_tensor_8_torch.float32_3", gamma)
    bv = b.literal("torch_tensor_8_torch.float32_4", beta)
    eps = b.const("float", "1.000000e-05")
    ve = b.emit(f"torch.aten.add.Scalar {vv}, {eps}, {b.const_int(1)} : {vt([8])}, !torch.float, !torch.int -> {vt([8])}")
    rs = b.emit(f"torch.aten.rsqrt {ve} : {vt([8])} -> {vt([8])}")
    m3, r3 = unsqueeze2(b, mv, 8), unsqueeze2(b, rs, 8)
    s88 = (1, 8, 8, 8)
    sub = b.emit(f"torch.aten.sub.Tensor {c1}, {m3}, {b.const_int(1)} : {vt(s88)}, {vt([8, 1, 1])}, !torch.int -> {vt(s88)}")
    mul = b.emit(f"torch.aten.mul.Tensor {sub}, {r3} : {vt(s88)}, {vt([8, 1, 1])} -> {vt(s88)}")
    g3, be3 = unsqueeze2(b, gv, 8), unsqueeze2(b, bv, 8)
    mul2 = b.emit(f"torch.aten.mul.Tensor {mul}, {g3} : {vt(s88)}, {vt([8, 1, 1])} -> {vt(s88)}")
    bn = b.emit(f"torch.aten.add.Tensor {mul2}, {be3}, {b.const_int(1)} : {vt(s88)}, {vt([8, 1, 1])}, !torch.int -> {vt(s88)}")
    r1 = b.emit(f"torch.aten.relu {bn} : {vt(s88)} -> {vt(s88)}")
    k, st, pd = b.ints(2, 2), b.ints(2, 2), b.ints(0, 0)
    false, true = b.const("bool", "false"), b.const("bool", "true")
    none2 = b.none()
    s44 = (1, 8, 4, 4)
    pool = b.emit(f"torch.aten.avg_pool2d {r1}, {k}, {st}, {pd}, {false}, {true}, {none2} : {vt(s88)}, !torch.list<int>, "
                  f"!torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool, !torch.none -> {vt(s44)}")
    # A rank-0 parameter as a literal: IREE 3.13's iree-compile crashes on a rank-0 dense_resource global
    # ("ElementsAttr does not provide iteration facilities").
    sc = b.emit(f"torch.vtensor.literal(dense<{float(scale):e}> : tensor<f32>) : {vt([])}")
    scaled = b.emit(f"torch.aten.mul.Tensor {pool}, {sc} : {vt(s44)}, {vt([])} -> {vt(s44)}")
    flat = b.emit(f"torch.aten.flatten.using_ints {scaled}, {b.const_int(1)}, {b.const_int(-1)} : {vt(s44)}, !torch.int, "
                  f"!torch.int -> {vt([1, 128])}")
    wlv = b.literal("torch_tensor_10_128_torch.float32", wl)
    blv = b.literal("torch_tensor_10_torch.float32", bl)
    lin = b.emit(f"torch.aten.linear {flat}, {wlv}, {blv} : {vt([1, 128])}, {vt([10, 128])}, {vt([10])} -> {vt([1, 10])}")
    logits = b.emit(f"torch.aten.div.Tensor {lin}, %arg1 : {vt([1, 10])}, {vt([])} -> {vt([1, 10])}")
    none3 = b.none()
    soft = b.emit(f"torch.aten.softmax.int {logits}, {b.const_int(-1)}, {none3} : {vt([1, 10])}, !torch.int, !torch.none "
                  f"-> {vt([1, 10])}")
    total = b.emit(f"torch.aten.sum {logits}, {none3} : {vt([1, 10])}, !torch.none -> {vt([])}")
    b.lines.append(f"    return {soft}, {total} : {vt([1, 10])}, {vt([])}")
    text = (
        "module @module {\n"
        f"  util.global private @__auto.stem.0.weight = dense_resource<__auto.stem.0.weight> : {tt(w0.shape)}\n"
        f"  func.func @main(%arg0: {vt(x.shape)}, %arg1: {vt([])}) -> ({vt([1, 10])}, {vt([])}) "
        "attributes {torch.assume_strict_symbolic_shapes} {\n" + "\n".join(b.lines) + "\n  }\n}\n\n" + blobs.text()
    )
    (HERE / "depthwise_cnn.mlir").write_text(text)
    np.save(HERE / "depthwise_cnn_x.npy", x)
    np.save(HERE / "depthwise_cnn_temperature.npy", temperature)

    # The same network in numpy (float64), independently of IREE.
    h = np.maximum(np_conv2d(x.astype(np.float64), w0, b0, 1, 1, 1), 0)
    h = np_conv2d(h, wd, None, 2, 1, 8)
    h = (h - mean[:, None, None]) / np.sqrt(var.astype(np.float64) + 1e-5)[:, None, None] * gamma[:, None, None] \
        + beta[:, None, None]
    h = np.maximum(h, 0)
    h = h.reshape(1, 8, 4, 2, 4, 2).mean(axis=(3, 5)) * float(scale)
    z = (h.reshape(1, 128) @ wl.T.astype(np.float64) + bl) / float(temperature)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    np.savez(HERE / "depthwise_cnn_expected.npz", (e / e.sum(-1, keepdims=True)).astype(np.float32),
             np.array(z.sum(), np.float32))


def reduction_chain(rng: np.random.Generator) -> None:
    blobs = Blobs()
    b = Body(blobs)
    x = (rng.standard_normal((4, 6, 32)) * 2 + 0.5).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 1.5, 32).astype(np.float32), (rng.standard_normal(32) * 0.2).astype(np.float32)
    s, s1 = (4, 6, 32), (4, 6, 1)
    true, false = b.const("bool", "true"), b.const("bool", "false")
    none = b.none()
    last = b.ints(-1)
    total = b.emit(f"torch.aten.sum.dim_IntList %arg0, {last}, {true}, {none} : {vt(s)}, !torch.list<int>, !torch.bool, "
                   f"!torch.none -> {vt(s1)}")
    n32 = b.const("float", "3.200000e+01")
    mean = b.emit(f"torch.aten.div.Scalar {total}, {n32} : {vt(s1)}, !torch.float -> {vt(s1)}")
    centred = b.emit(f"torch.aten.sub.Tensor %arg0, {mean}, {b.const_int(1)} : {vt(s)}, {vt(s1)}, !torch.int -> {vt(s)}")
    sq = b.emit(f"torch.aten.mul.Tensor {centred}, {centred} : {vt(s)}, {vt(s)} -> {vt(s)}")
    var = b.emit(f"torch.aten.mean.dim {sq}, {last}, {true}, {none} : {vt(s)}, !torch.list<int>, !torch.bool, !torch.none "
                 f"-> {vt(s1)}")
    eps = b.const("float", "1.000000e-05")
    ve = b.emit(f"torch.aten.add.Scalar {var}, {eps}, {b.const_int(1)} : {vt(s1)}, !torch.float, !torch.int -> {vt(s1)}")
    rs = b.emit(f"torch.aten.rsqrt {ve} : {vt(s1)} -> {vt(s1)}")
    normed = b.emit(f"torch.aten.mul.Tensor {centred}, {rs} : {vt(s)}, {vt(s1)} -> {vt(s)}")
    gv = b.literal("torch_tensor_32_torch.float32", gamma)
    bv = b.literal("torch_tensor_32_torch.float32_1", beta)
    scaled = b.emit(f"torch.aten.mul.Tensor {normed}, {gv} : {vt(s)}, {vt([32])} -> {vt(s)}")
    shifted = b.emit(f"torch.aten.add.Tensor {scaled}, {bv}, {b.const_int(1)} : {vt(s)}, {vt([32])}, !torch.int -> {vt(s)}")
    middle = b.ints(1)
    summed = b.emit(f"torch.aten.sum.dim_IntList {shifted}, {middle}, {false}, {none} : {vt(s)}, !torch.list<int>, "
                    f"!torch.bool, !torch.none -> {vt([4, 32])}")
    am = b.emit(f"torch.aten.argmax {summed}, {b.const_int(-1)}, {false} : {vt([4, 32])}, !torch.int, !torch.bool -> "
                f"{vt([4], 'si64')}")
    first = b.ints(0)
    mx = b.emit(f"torch.aten.amax {summed}, {first}, {false} : {vt([4, 32])}, !torch.list<int>, !torch.bool -> {vt([32])}")
    grand = b.emit(f"torch.aten.sum {mx}, {none} : {vt([32])}, !torch.none -> {vt([])}")
    b.lines.append(f"    return {summed}, {am}, {grand} : {vt([4, 32])}, {vt([4], 'si64')}, {vt([])}")
    text = (
        "module @module {\n"
        f"  func.func @main(%arg0: {vt(s)}) -> ({vt([4, 32])}, {vt([4], 'si64')}, {vt([])}) "
        "attributes {torch.assume_strict_symbolic_shapes} {\n" + "\n".join(b.lines) + "\n  }\n}\n\n" + blobs.text()
    )
    (HERE / "reduction_chain.mlir").write_text(text)
    np.save(HERE / "reduction_chain_x.npy", x)
    x64 = x.astype(np.float64)
    c = x64 - x64.mean(-1, keepdims=True)
    n = c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * gamma + beta
    summed_np = n.sum(1)
    np.savez(HERE / "reduction_chain_expected.npz", summed_np.astype(np.float32), summed_np.argmax(-1).astype(np.int64),
             np.array(summed_np.max(0).sum(), np.float32))


def dynamic_mlp(rng: np.random.Generator) -> None:
    blobs = Blobs()
    b = Body(blobs)
    w1, b1 = (rng.standard_normal((8, 16)) * 0.3).astype(np.float32), (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2, b2 = (rng.standard_normal((4, 8)) * 0.5).astype(np.float32), (rng.standard_normal(4) * 0.1).astype(np.float32)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    b.lines.append('    %s0 = torch.symbolic_int "s0" {min_val = 2, max_val = 64} : !torch.int')
    b.lines.append(f"    torch.bind_symbolic_shape %arg0, [%s0], affine_map<()[s0] -> (s0, 16)> : {vt(['?', 16])}")
    w1v, b1v = b.literal("torch_tensor_8_16_torch.float32", w1), b.literal("torch_tensor_8_torch.float32", b1)
    h = b.emit(f"torch.aten.linear %arg0, {w1v}, {b1v} : {vt(['?', 16])}, {vt([8, 16])}, {vt([8])} -> {vt(['?', 8])}")
    b.lines.append(f"    torch.bind_symbolic_shape {h}, [%s0], affine_map<()[s0] -> (s0, 8)> : {vt(['?', 8])}")
    t = b.emit(f"torch.aten.tanh {h} : {vt(['?', 8])} -> {vt(['?', 8])}")
    b.lines.append(f"    torch.bind_symbolic_shape {t}, [%s0], affine_map<()[s0] -> (s0, 8)> : {vt(['?', 8])}")
    w2v, b2v = b.literal("torch_tensor_4_8_torch.float32", w2), b.literal("torch_tensor_4_torch.float32", b2)
    z = b.emit(f"torch.aten.linear {t}, {w2v}, {b2v} : {vt(['?', 8])}, {vt([4, 8])}, {vt([4])} -> {vt(['?', 4])}")
    b.lines.append(f"    torch.bind_symbolic_shape {z}, [%s0], affine_map<()[s0] -> (s0, 4)> : {vt(['?', 4])}")
    none = b.none()
    ls = b.emit(f"torch.aten.log_softmax.int {z}, {b.const_int(-1)}, {none} : {vt(['?', 4])}, !torch.int, !torch.none -> "
                f"{vt(['?', 4])}")
    b.lines.append(f"    torch.bind_symbolic_shape {ls}, [%s0], affine_map<()[s0] -> (s0, 4)> : {vt(['?', 4])}")
    b.lines.append(f"    return {ls} : {vt(['?', 4])}")
    text = (
        "module @module {\n"
        f"  func.func @main(%arg0: {vt(['?', 16])}) -> {vt(['?', 4])} {{\n" + "\n".join(b.lines) + "\n  }\n}\n\n"
        + blobs.text()
    )
    (HERE / "dynamic_mlp.mlir").write_text(text)
    np.save(HERE / "dynamic_mlp_x.npy", x)
    zz = np.tanh(x.astype(np.float64) @ w1.T + b1) @ w2.T + b2
    zz = zz - zz.max(-1, keepdims=True)
    np.savez(HERE / "dynamic_mlp_expected.npz", (zz - np.log(np.exp(zz).sum(-1, keepdims=True))).astype(np.float32))


def np_max_pool(x: np.ndarray, k: int, stride: int, pad: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
    oh = (x.shape[2] + 2 * pad - k) // stride + 1
    ow = (x.shape[3] + 2 * pad - k) // stride + 1
    out = np.full((*x.shape[:2], oh, ow), -np.inf)
    for i in range(k):
        for j in range(k):
            out = np.maximum(out, xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride])
    return out


def se_resnet(rng: np.random.Generator) -> None:
    """A residual block with squeeze-and-excitation, a padded max-pool, a concatenation and hardswish."""
    blobs = Blobs()
    b = Body(blobs)
    x = rng.standard_normal((1, 4, 12, 12)).astype(np.float32)
    w0, b0 = (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32), (rng.standard_normal(8) * 0.1).astype(np.float32)
    wa, ba = (rng.standard_normal((8, 8, 3, 3)) * 0.2).astype(np.float32), (rng.standard_normal(8) * 0.1).astype(np.float32)
    wb = (rng.standard_normal((8, 8, 1, 1)) * 0.4).astype(np.float32)
    ws1, bs1 = (rng.standard_normal((4, 8, 1, 1)) * 0.5).astype(np.float32), (rng.standard_normal(4) * 0.1).astype(np.float32)
    ws2, bs2 = (rng.standard_normal((8, 4, 1, 1)) * 0.5).astype(np.float32), (rng.standard_normal(8) * 0.1).astype(np.float32)
    wl, bl = (rng.standard_normal((5, 16)) * 0.3).astype(np.float32), (rng.standard_normal(5) * 0.1).astype(np.float32)
    blobs.add("__auto.stem.weight", w0)
    b.lines.append(f"    %stem_w = util.global.load @__auto.stem.weight : {tt(w0.shape)}")
    w0v = b.emit(f"torch_c.from_builtin_tensor %stem_w : {tt(w0.shape)} -> {vt(w0.shape)}")
    b0v = b.literal("torch_tensor_8_torch.float32", b0)
    s12, s6 = (1, 8, 12, 12), (1, 8, 6, 6)
    c0 = conv2d(b, "%arg0", x.shape, w0v, w0.shape, b0v, vt([8]), 1, 1, 1, s12)
    r0 = b.emit(f"torch.aten.relu {c0} : {vt(s12)} -> {vt(s12)}")
    k, st, pd, dl = b.ints(3, 3), b.ints(2, 2), b.ints(1, 1), b.ints(1, 1)
    false = b.const("bool", "false")
    pool = b.emit(f"torch.aten.max_pool2d {r0}, {k}, {st}, {pd}, {dl}, {false} : {vt(s12)}, !torch.list<int>, "
                  f"!torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> {vt(s6)}")
    wav, bav = b.literal("torch_tensor_8_8_3_3_torch.float32", wa), b.literal("torch_tensor_8_torch.float32_1", ba)
    ca = conv2d(b, pool, s6, wav, wa.shape, bav, vt([8]), 1, 1, 1, s6)
    ra = b.emit(f"torch.aten.relu {ca} : {vt(s6)} -> {vt(s6)}")
    wbv = b.literal("torch_tensor_8_8_1_1_torch.float32", wb)
    none = b.none()
    cb = conv2d(b, pool, s6, wbv, wb.shape, none, "!torch.none", 1, 0, 1, s6)
    added = b.emit(f"torch.aten.add.Tensor {ra}, {cb}, {b.const_int(1)} : {vt(s6)}, {vt(s6)}, !torch.int -> {vt(s6)}")
    res = b.emit(f"torch.aten.relu {added} : {vt(s6)} -> {vt(s6)}")
    hw = b.ints(2, 3)
    true = b.const("bool", "true")
    s1 = (1, 8, 1, 1)
    sq = b.emit(f"torch.aten.mean.dim {res}, {hw}, {true}, {none} : {vt(s6)}, !torch.list<int>, !torch.bool, !torch.none "
                f"-> {vt(s1)}")
    ws1v, bs1v = b.literal("torch_tensor_4_8_1_1_torch.float32", ws1), b.literal("torch_tensor_4_torch.float32", bs1)
    e1 = conv2d(b, sq, s1, ws1v, ws1.shape, bs1v, vt([4]), 1, 0, 1, (1, 4, 1, 1))
    e1r = b.emit(f"torch.aten.relu {e1} : {vt((1, 4, 1, 1))} -> {vt((1, 4, 1, 1))}")
    ws2v, bs2v = b.literal("torch_tensor_8_4_1_1_torch.float32", ws2), b.literal("torch_tensor_8_torch.float32_2", bs2)
    e2 = conv2d(b, e1r, (1, 4, 1, 1), ws2v, ws2.shape, bs2v, vt([8]), 1, 0, 1, s1)
    gate = b.emit(f"torch.aten.sigmoid {e2} : {vt(s1)} -> {vt(s1)}")
    excited = b.emit(f"torch.aten.mul.Tensor {res}, {gate} : {vt(s6)}, {vt(s1)} -> {vt(s6)}")
    s16 = (1, 16, 6, 6)
    both = b.emit(f"torch.prim.ListConstruct {excited}, {pool} : ({vt(s6)}, {vt(s6)}) -> !torch.list<vtensor>")
    cat = b.emit(f"torch.aten.cat {both}, {b.const_int(1)} : !torch.list<vtensor>, !torch.int -> {vt(s16)}")
    hsw = b.emit(f"torch.aten.hardswish {cat} : {vt(s16)} -> {vt(s16)}")
    one = b.ints(1, 1)
    gap = b.emit(f"torch.aten.adaptive_avg_pool2d {hsw}, {one} : {vt(s16)}, !torch.list<int> -> {vt((1, 16, 1, 1))}")
    flat_shape = b.ints(1, 16)
    flat = b.emit(f"torch.aten.view {gap}, {flat_shape} : {vt((1, 16, 1, 1))}, !torch.list<int> -> {vt([1, 16])}")
    wlv, blv = b.literal("torch_tensor_5_16_torch.float32", wl), b.literal("torch_tensor_5_torch.float32", bl)
    lin = b.emit(f"torch.aten.linear {flat}, {wlv}, {blv} : {vt([1, 16])}, {vt([5, 16])}, {vt([5])} -> {vt([1, 5])}")
    out = b.emit(f"torch.aten.log_softmax.int {lin}, {b.const_int(-1)}, {none} : {vt([1, 5])}, !torch.int, !torch.none "
                 f"-> {vt([1, 5])}")
    b.lines.append(f"    return {out} : {vt([1, 5])}")
    text = (
        "module @module {\n"
        f"  util.global private @__auto.stem.weight = dense_resource<__auto.stem.weight> : {tt(w0.shape)}\n"
        f"  func.func @main(%arg0: {vt(x.shape)}) -> {vt([1, 5])} attributes {{torch.assume_strict_symbolic_shapes}} {{\n"
        + "\n".join(b.lines) + "\n  }\n}\n\n" + blobs.text()
    )
    (HERE / "se_resnet.mlir").write_text(text)
    np.save(HERE / "se_resnet_x.npy", x)
    h = np.maximum(np_conv2d(x.astype(np.float64), w0, b0, 1, 1, 1), 0)
    p = np_max_pool(h, 3, 2, 1)
    r = np.maximum(np.maximum(np_conv2d(p, wa, ba, 1, 1, 1), 0) + np_conv2d(p, wb, None, 1, 0, 1), 0)
    e = np.maximum(np_conv2d(r.mean(axis=(2, 3), keepdims=True), ws1, bs1, 1, 0, 1), 0)
    g = 1 / (1 + np.exp(-np_conv2d(e, ws2, bs2, 1, 0, 1)))
    c = np.concatenate([r * g, p], axis=1)
    c = c * np.clip(c + 3, 0, 6) / 6
    z = c.mean(axis=(2, 3)) @ wl.T.astype(np.float64) + bl
    z = z - z.max(-1, keepdims=True)
    np.savez(HERE / "se_resnet_expected.npz", (z - np.log(np.exp(z).sum(-1, keepdims=True))).astype(np.float32))


def masked_embedding(rng: np.random.Generator) -> None:
    """Token ids (si64) and an attention mask (i1) as a language model takes them: embedding, masked mean
    over the sequence, and a boolean result (which features are positive)."""
    blobs = Blobs()
    b = Body(blobs)
    table = rng.standard_normal((20, 8)).astype(np.float32)
    ids = rng.integers(0, 20, (2, 5)).astype(np.int64)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.bool_)
    tv = b.literal("torch_tensor_20_8_torch.float32", table)
    false, true = b.const("bool", "false"), b.const("bool", "true")
    emb = b.emit(f"torch.aten.embedding {tv}, %arg0, {b.const_int(-1)}, {false}, {false} : {vt([20, 8])}, "
                 f"{vt([2, 5], 'si64')}, !torch.int, !torch.bool, !torch.bool -> {vt([2, 5, 8])}")
    m3 = b.emit(f"torch.aten.unsqueeze %arg1, {b.const_int(-1)} : {vt([2, 5], 'i1')}, !torch.int -> {vt([2, 5, 1], 'i1')}")
    zero = b.const("float", "0.000000e+00")
    kept = b.emit(f"torch.aten.where.ScalarOther {m3}, {emb}, {zero} : {vt([2, 5, 1], 'i1')}, {vt([2, 5, 8])}, "
                  f"!torch.float -> {vt([2, 5, 8])}")
    seq = b.ints(1)
    none = b.none()
    total = b.emit(f"torch.aten.sum.dim_IntList {kept}, {seq}, {false}, {none} : {vt([2, 5, 8])}, !torch.list<int>, "
                   f"!torch.bool, !torch.none -> {vt([2, 8])}")
    f32 = b.const_int(6)
    count = b.emit(f"torch.aten.sum.dim_IntList %arg1, {seq}, {true}, {f32} : {vt([2, 5], 'i1')}, !torch.list<int>, "
                   f"!torch.bool, !torch.int -> {vt([2, 1])}")
    mean = b.emit(f"torch.aten.div.Tensor {total}, {count} : {vt([2, 8])}, {vt([2, 1])} -> {vt([2, 8])}")
    positive = b.emit(f"torch.aten.gt.Scalar {mean}, {zero} : {vt([2, 8])}, !torch.float -> {vt([2, 8], 'i1')}")
    b.lines.append(f"    return {mean}, {positive} : {vt([2, 8])}, {vt([2, 8], 'i1')}")
    text = (
        "module @module {\n"
        f"  func.func @main(%arg0: {vt([2, 5], 'si64')}, %arg1: {vt([2, 5], 'i1')}) -> ({vt([2, 8])}, "
        f"{vt([2, 8], 'i1')}) attributes {{torch.assume_strict_symbolic_shapes}} {{\n"
        + "\n".join(b.lines) + "\n  }\n}\n\n" + blobs.text()
    )
    (HERE / "masked_embedding.mlir").write_text(text)
    np.save(HERE / "masked_embedding_ids.npy", ids)
    np.save(HERE / "masked_embedding_mask.npy", mask)
    e = table.astype(np.float64)[ids] * mask[..., None]
    mean_np = e.sum(1) / mask.sum(1, keepdims=True)
    np.savez(HERE / "masked_embedding_expected.npz", mean_np.astype(np.float32), mean_np > 0)


if __name__ == "__main__":
    depthwise_cnn(np.random.default_rng(0))
    reduction_chain(np.random.default_rng(1))
    dynamic_mlp(np.random.default_rng(2))
    se_resnet(np.random.default_rng(3))
    masked_embedding(np.random.default_rng(4))
