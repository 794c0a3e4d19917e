#!/usr/bin/env python3
"""Writes src/formats/iq_tables.cpp: the lookup tables of the i-quants, read back from ggml itself.

The tables are not copied from ggml's sources. The script builds blocks whose indices select each
grid point (with unit scales and no sign bits), runs them through the shipped ggml's own
dequantizer (libggml-base.so of the oracle kit, llama.cpp v0.4.0) and derives the table entries
from the values that come back. Each grid point is then stored in Tandem's own compact layout: its
coordinates as 2- or 3-bit codes into a small table of levels (see iq_tables.h).

Usage: eval "$(../shared/oracle/setup.sh)"; python3 tools/gen_iq_tables.py [OUT.cpp]
Needs only the Python standard library and the kit (TANDEM_ORACLE_KIT, else ../shared/oracle).
"""
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.environ.get("TANDEM_ORACLE_KIT") or os.path.join(REPO, "..", "shared", "oracle"))
from oracle_ggml import GGML, GGML_TYPES  # noqa: E402

QK_K = 256
FP16_ONE = 0x3C00


def dequant(g, type_name, raw, n):
    return list(g.to_float(GGML_TYPES[type_name], raw, n))


def exact_int(v):
    r = round(v)
    if abs(v - r) > 1e-6:
        raise SystemExit(f"probe returned a non-integer grid value {v}")
    return int(r)


# ---------------------------------------------------------------- one probe per grid
# Every probe returns a list of grid points, each a list of coordinates (ints), in index order.

def probe_iq2xxs(g):
    # block_iq2_xxs: fp16 d; uint16 qs[32]. Per 32 values: 4 bytes of grid indices, then a uint32
    # whose top 4 bits are the scale (0 -> d * 0.5 * 0.25 = 1/8) and the rest sign indices (0).
    points = []
    for first in range(0, 256, 32):
        raw = struct.pack("<H", FP16_ONE)
        for ib in range(8):
            raw += bytes(first + 4 * ib + l for l in range(4)) + struct.pack("<I", 0)
        vals = dequant(g, "iq2_xxs", raw, QK_K)
        points += [[exact_int(8 * v) for v in vals[8 * p:8 * p + 8]] for p in range(32)]
    return points


def probe_iq2xs(g):
    # block_iq2_xs: fp16 d; uint16 qs[32] (9-bit index | 7-bit sign index << 9); uint8 scales[8].
    points = []
    for first in range(0, 512, 32):
        raw = struct.pack("<H", FP16_ONE) + struct.pack("<32H", *range(first, first + 32)) + bytes(8)
        vals = dequant(g, "iq2_xs", raw, QK_K)
        points += [[exact_int(8 * v) for v in vals[8 * p:8 * p + 8]] for p in range(32)]
    return points


def probe_iq2s(g):
    # block_iq2_s: fp16 d; uint8 qs[32] (low 8 index bits); uint8 signs[32]; uint8 qh[8] (2 high
    # index bits per group of 8, group l at bits 2l); uint8 scales[8].
    points = []
    for first in range(0, 1024, 32):
        idx = list(range(first, first + 32))
        qs = bytes(i & 255 for i in idx)
        qh = bytes(sum(((idx[4 * ib + l] >> 8) & 3) << (2 * l) for l in range(4)) for ib in range(8))
        raw = struct.pack("<H", FP16_ONE) + qs + bytes(32) + qh + bytes(8)
        vals = dequant(g, "iq2_s", raw, QK_K)
        points += [[exact_int(8 * v) for v in vals[8 * p:8 * p + 8]] for p in range(32)]
    return points


def probe_iq3xxs(g):
    # block_iq3_xxs: fp16 d; uint8 qs[64] (one grid index per 4 values); then per 32 values a
    # uint32 with the scale in the top 4 bits (0 -> d * 0.5 * 0.5 = 1/4) and sign indices (0).
    points = []
    for first in range(0, 256, 64):
        raw = struct.pack("<H", FP16_ONE) + bytes(range(first, first + 64)) + bytes(32)
        vals = dequant(g, "iq3_xxs", raw, QK_K)
        points += [[exact_int(4 * v) for v in vals[4 * p:4 * p + 4]] for p in range(64)]
    return points


def probe_iq3s(g):
    # block_iq3_s: fp16 d; uint8 qs[64] (low 8 index bits); uint8 qh[8] (9th index bit, one bit per
    # index of a group of 32); uint8 signs[32]; uint8 scales[4] (0 -> d * 1).
    points = []
    for first in range(0, 512, 64):
        idx = list(range(first, first + 64))
        qs = bytes(i & 255 for i in idx)
        qh = bytes(sum(((idx[8 * ib + k] >> 8) & 1) << k for k in range(8)) for ib in range(8))
        raw = struct.pack("<H", FP16_ONE) + qs + qh + bytes(32) + bytes(4)
        vals = dequant(g, "iq3_s", raw, QK_K)
        points += [[exact_int(v) for v in vals[4 * p:4 * p + 4]] for p in range(64)]
    return points


def probe_iq1s(g):
    # block_iq1_s: fp16 d; uint8 qs[32] (low 8 index bits); uint16 qh[8]: per 32 values 3 high index
    # bits per group of 8 (group l at bits 3l), scale in bits 12-14 (0 -> d * 1) and the sign of
    # the shift in bit 15 (0 -> +1/8). Values are grid + 1/8.
    points = []
    for first in range(0, 2048, 32):
        idx = list(range(first, first + 32))
        qs = bytes(i & 255 for i in idx)
        qh = [sum(((idx[4 * ib + l] >> 8) & 7) << (3 * l) for l in range(4)) for ib in range(8)]
        raw = struct.pack("<H", FP16_ONE) + qs + struct.pack("<8H", *qh)
        vals = dequant(g, "iq1_s", raw, QK_K)
        points += [[exact_int(v - 0.125) for v in vals[8 * p:8 * p + 8]] for p in range(32)]
    return points


def probe_nibble_values(g, type_name, head):
    # A 32-value block whose byte j holds nibble j (low) and 15 - j (high) for j < 16: the first
    # 16 outputs are table[0..15] times the unit scale set by `head`.
    raw = head + bytes((j & 15) | ((15 - j) & 15) << 4 for j in range(16))
    vals = dequant(g, type_name, raw, 32)
    return [exact_int(v) for v in vals[:16]]


def probe_ksigns(g):
    # iq2_xxs with grid index 0 (all coordinates 8) and sign index s in group 0: the signs read back.
    out = []
    for first in range(0, 128, 4):
        raw = struct.pack("<H", FP16_ONE)
        for ib in range(8):
            word = 0
            for l in range(4):
                word |= (first + l if ib == 0 else 0) << (7 * l)
            raw += bytes(4) + struct.pack("<I", word)
        vals = dequant(g, "iq2_xxs", raw, QK_K)
        for l in range(4):
            out.append(sum(1 << j for j in range(8) if vals[8 * l + j] < 0))
    return out


# ---------------------------------------------------------------- output

def pack_grid(points, name):
    levels = sorted({c for p in points for c in p})
    bits = 2 if len(levels) <= 4 else 3
    if len(levels) > (1 << bits) or bits * len(points[0]) > 16:
        raise SystemExit(f"{name}: {len(levels)} levels do not fit the packed layout")
    codes = []
    for p in points:
        word = 0
        for j, c in enumerate(p):
            word |= levels.index(c) << (bits * j)
        codes.append(word)
    return levels, bits, codes


def c_array(ctype, name, values, per_line, fmt, qualifier="const"):
    lines = []
    for i in range(0, len(values), per_line):
        lines.append("    " + ", ".join(fmt(v) for v in values[i:i + per_line]) + ",")
    return f"{qualifier} {ctype} {name}[{len(values)}] = {{\n" + "\n".join(lines) + "\n};\n"


def check_header_array(name, values):
    """Tables kept in iq_tables.h (constexpr, for the kernels) are checked, not written."""
    with open(os.path.join(REPO, "src", "formats", "iq_tables.h")) as f:
        m = re.search(name + r"\[\d+\] = \{([^}]*)\}", f.read())
    if m is None or [int(v) for v in m.group(1).replace(",", " ").split()] != list(values):
        raise SystemExit(f"iq_tables.h's {name} differs from ggml's: {values}")


# The kernels' expanded grids (iq_tables.h), computed by the compiler from the codes.
EXPAND_CODE = """
// The kernels' forms of the grids (iq_tables.h), expanded from the codes at compile time.
template <typename T, int N>
constexpr IqPoints<T, N> expand_points(const uint16_t (&codes)[N], const int8_t* levels,
                                       int dims, int code_bits, int bias, int scale = 1) {
    IqPoints<T, N> out{};
    for (int p = 0; p < N; ++p) {
        T word = 0;
        for (int j = 0; j < dims; ++j) {
            const int code = (codes[p] >> (code_bits * j)) & ((1 << code_bits) - 1);
            word |= static_cast<T>(static_cast<uint8_t>((levels[code] + bias) * scale)) << (8 * j);
        }
        out.p[p] = word;
    }
    return out;
}
"""
POINT_TABLES = """
constinit const IqPoints<uint64_t, 256> kIq2xxsPoints =
    expand_points<uint64_t>(kIq2xxsCodes, kIq2xxsLevels, 8, 2, 0);
constinit const IqPoints<uint64_t, 512> kIq2xsPoints =
    expand_points<uint64_t>(kIq2xsCodes, kIq2xsLevels, 8, 2, 0);
constinit const IqPoints<uint64_t, 1024> kIq2sPoints =
    expand_points<uint64_t>(kIq2sCodes, kIq2sLevels, 8, 2, 0);
constinit const IqPoints<uint32_t, 256> kIq3xxsPoints =
    expand_points<uint32_t>(kIq3xxsCodes, kIq3xxsLevels, 4, 3, 0);
constinit const IqPoints<uint32_t, 512> kIq3sPoints =
    expand_points<uint32_t>(kIq3sCodes, kIq3sLevels, 4, 3, 0);
constinit const IqPoints<uint64_t, 2048> kIq1sPointsEighths =
    expand_points<uint64_t>(kIq1sCodes, kIq1sLevels, 8, 2, 1, 8);
"""


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "src", "formats", "iq_tables.cpp")
    g = GGML()

    signs = probe_ksigns(g)
    for s, byte in enumerate(signs):  # the definition iq_tables.h relies on: bit 7 = parity of bits 0-6
        if byte != s | ((bin(s).count("1") & 1) << 7):
            raise SystemExit(f"sign table entry {s} = {byte} breaks the even-parity rule")

    grids = [
        ("iq2xxs", "kIq2xxsGrid", probe_iq2xxs(g)),
        ("iq2xs", "kIq2xsGrid", probe_iq2xs(g)),
        ("iq2s", "kIq2sGrid", probe_iq2s(g)),
        ("iq3xxs", "kIq3xxsGrid", probe_iq3xxs(g)),
        ("iq3s", "kIq3sGrid", probe_iq3s(g)),
        ("iq1s", "kIq1sGrid", probe_iq1s(g)),
    ]
    iq4nl = probe_nibble_values(g, "iq4_nl", struct.pack("<H", FP16_ONE))
    check_header_array("kIq4nlValues", iq4nl)
    e2m1 = probe_nibble_values(g, "mxfp4", bytes([128]))  # E8M0 128 -> half scale 1.0

    src = [
        "// Lookup tables of the i-quants and 4-bit float formats. Generated by tools/gen_iq_tables.py,",
        "// which reads every entry back from ggml's own dequantizer (llama.cpp v0.4.0, through the",
        "// oracle kit); do not edit by hand. Layouts: iq_tables.h.",
        '#include "formats/iq_tables.h"',
        "",
        "namespace tandem {",
        "namespace {",
        "",
        "// clang-format off",
    ]
    objects = []
    for short, obj, points in grids:
        levels, bits, codes = pack_grid(points, short)
        src.append(c_array("int8_t", f"k{short.capitalize()}Levels", levels, 16, str, "constexpr"))
        src.append(c_array("uint16_t", f"k{short.capitalize()}Codes", codes, 12, lambda v: f"0x{v:04x}",
                           "constexpr"))
        objects.append(f"const IqGrid {obj} = {{k{short.capitalize()}Codes, {len(points)}, {len(points[0])}, "
                       f"{bits}, k{short.capitalize()}Levels}};")
    src.append("// clang-format on")
    src.append(EXPAND_CODE)
    src.append("}  // namespace")
    src.append("")
    src += objects
    src.append(POINT_TABLES)
    src.append(c_array("int8_t", "kE2m1DoubledValues", e2m1, 16, str))
    src.append("}  // namespace tandem")
    text = "\n".join(src).replace("\n\n\n", "\n\n") + "\n"
    with open(out_path, "w") as f:
        f.write(text)
    print(f"wrote {out_path}: " + ", ".join(f"{s} {len(p)} points" for s, _, p in grids))


if __name__ == "__main__":
    main()
