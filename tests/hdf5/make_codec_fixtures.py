#!/usr/bin/env python3
"""Writes the codec tests' HDF5 fixtures with h5py, as users write them.

usage: make_codec_fixtures.py OUT_DIR [SCALE]   (SCALE: rows x SCALE, for bench/codec_bench)

For each codec and layout, OUT_DIR/<name>.h5 holds float32 dataset "data", and OUT_DIR/<name>.raw
holds the bytes h5py itself reads back from that file (for the plugin filters h5py decodes,
checked equal to the array written; for Zstd 32015 and Bitshuffle-Zstd, which no Debian plugin
writes, the array written: their chunks are made here from zstd frames by
python3-zstandard and written with H5Dwrite_chunk). OUT_DIR/manifest.txt lists "<name> <filters>" per fixture.
bitshuffle_zstd_plugin.h5 is Bitshuffle in Zstd mode written through the installed plugin (Debian's
stores it uncompressed), with h5py's read of it; lzf.h5 is for the HDF5_PLUGIN_PATH test.
Exits 77 (skipped) when h5py, hdf5plugin, bitshuffle or zstandard is missing.
"""
import os
import struct
import sys

try:
    import numpy as np
    import h5py
    import hdf5plugin
    import bitshuffle
    import zstandard
except ImportError as e:  # the test reports it as skipped, with this message
    print(f"codec fixtures need python3-h5py python3-hdf5plugin bitshuffle python3-zstandard: {e}")
    sys.exit(77)

out = sys.argv[1]
scale = int(sys.argv[2]) if len(sys.argv) > 2 else 1
os.makedirs(out, exist_ok=True)

# Layouts: "span": one row spans 16 chunks; "rows": one chunk holds 50 rows (the last chunk a
# partial edge chunk); "odd": chunks of 13 x 37 = 481 elements, so Bitshuffle's last block is
# partial and leaves 481 % 8 elements stored raw.
LAYOUTS = {"span": ((40 * scale, 2048), (8, 128)), "rows": ((310 * scale, 64), (50, 64)),
           "odd": ((103 * scale, 37), (13, 37))}


def data(shape, seed):
    rng = np.random.default_rng(seed)
    a = np.round(rng.standard_normal(shape) * 4).astype(np.float32) / 8  # compressible
    a[::16] = rng.integers(0, 2**32, size=a[::16].shape, dtype=np.uint32).view(np.float32)  # not
    return a


def h5py_codecs():
    b = hdf5plugin.Blosc
    return {
        "gzip": dict(compression="gzip", compression_opts=4, shuffle=True, fletcher32=True),
        "lz4": dict(**hdf5plugin.LZ4(nbytes=1024)),  # small blocks: several per chunk
        "bitshuffle_lz4": dict(**hdf5plugin.Bitshuffle(nelems=0, cname="lz4")),
        "bitshuffle_none": dict(**hdf5plugin.Bitshuffle(nelems=0, cname="none")),
        "bitshuffle_lz4_b64": dict(**hdf5plugin.Bitshuffle(nelems=64, cname="lz4")),
        "bitshuffle_none_b64": dict(**hdf5plugin.Bitshuffle(nelems=64, cname="none")),
        "blosc_lz4_shuffle": dict(**b(cname="lz4", clevel=5, shuffle=b.SHUFFLE)),
        "blosc_zstd_bitshuffle": dict(**b(cname="zstd", clevel=3, shuffle=b.BITSHUFFLE)),
        "blosc_blosclz_noshuffle": dict(**b(cname="blosclz", clevel=5, shuffle=b.NOSHUFFLE)),
        "lz4_fletcher32": dict(fletcher32=True, **hdf5plugin.LZ4(nbytes=0)),
    }


def chunks_of(a, chunk):
    """(offset, chunk array padded to the full chunk shape) for every chunk, row-major."""
    for r in range(0, a.shape[0], chunk[0]):
        for c in range(0, a.shape[1], chunk[1]):
            part = np.zeros(chunk, dtype=a.dtype)
            piece = a[r:r + chunk[0], c:c + chunk[1]]
            part[:piece.shape[0], :piece.shape[1]] = piece
            yield (r, c), part


def zstd_chunk(part):
    return zstandard.ZstdCompressor(level=3).compress(part.tobytes())


def bitshuffle_zstd_chunk(part, block=256):
    # bshuf_h5filter's format: 8-byte BE total, 4-byte BE block bytes, per block 4-byte BE size
    # + zstd frame of the bit-transposed block, then the count % 8 trailing elements raw.
    flat = part.reshape(-1)
    e = flat.itemsize
    blob = [struct.pack(">QI", flat.nbytes, block * e)]
    i = 0
    while i < flat.size:
        n = min(block, flat.size - i)
        n -= n % 8
        if n == 0:
            break
        t = bitshuffle.bitshuffle(flat[i:i + n], n).tobytes()
        z = zstandard.ZstdCompressor(level=3).compress(t)
        blob.append(struct.pack(">I", len(z)) + z)
        i += n
    blob.append(flat[i:].tobytes())
    return b"".join(blob)


manifest = []
seed = 0
for lname, (shape, chunk) in LAYOUTS.items():
    for cname, kw in h5py_codecs().items():
        seed += 1
        a = data(shape, seed)
        name = f"{cname}_{lname}"
        path = os.path.join(out, name + ".h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("data", data=a, chunks=chunk, **kw)
        with h5py.File(path, "r") as f:
            back = f["data"][()]
        if back.tobytes() != a.tobytes():
            sys.exit(f"h5py read back different bytes from {path}")
        back.astype("<f4").tofile(os.path.join(out, name + ".raw"))
        manifest.append(name)
    # Bitshuffle-Zstd is built here too: Debian's bitshuffle plugin (0.3.5) predates Zstd and, given
    # cname="zstd", writes plain bitshuffled chunks under compression code 3. Its set_local shifts
    # the user's values up three slots, so (256, 3) becomes cd_values[3:5].
    for cname, make, fid, opts in (("zstd", zstd_chunk, 32015, (3,)),
                                   ("bitshuffle_zstd", bitshuffle_zstd_chunk, 32008, (256, 3))):
        seed += 1
        a = data(shape, seed)
        name = f"{cname}_{lname}"
        path = os.path.join(out, name + ".h5")
        with h5py.File(path, "w") as f:
            d = f.create_dataset("data", shape=shape, dtype="<f4", chunks=chunk, compression=fid,
                                 compression_opts=opts, allow_unknown_filter=True)
            for off, part in chunks_of(a, chunk):
                d.id.write_direct_chunk(off, make(part))
        a.astype("<f4").tofile(os.path.join(out, name + ".raw"))
        manifest.append(name)

# LZF (h5py's own filter 32000) for the HDF5_PLUGIN_PATH fallback test.
a = data((64, 64), 99)
with h5py.File(os.path.join(out, "lzf.h5"), "w") as f:
    f.create_dataset("data", data=a, chunks=(16, 64), compression="lzf")
a.astype("<f4").tofile(os.path.join(out, "lzf.raw"))

# Bitshuffle in Zstd mode written through the installed plugin, as h5py users write it (Debian's
# plugin stores such chunks uncompressed, see above; a plugin with Zstd support compresses them),
# and the bytes h5py reads back through the same plugin: gpufeed must read what that plugin reads.
a = data((103, 37), 98)
path = os.path.join(out, "bitshuffle_zstd_plugin.h5")
with h5py.File(path, "w") as f:
    f.create_dataset("data", data=a, chunks=(13, 37), compression=32008, compression_opts=(0, 3))
with h5py.File(path, "r") as f:
    back = f["data"][()]
if back.tobytes() != a.tobytes():
    sys.exit(f"h5py read back different bytes from {path}")
back.astype("<f4").tofile(os.path.join(out, "bitshuffle_zstd_plugin.raw"))

with open(os.path.join(out, "manifest.txt"), "w") as m:
    m.write("\n".join(manifest) + "\n")
