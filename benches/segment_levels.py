#!/usr/bin/env python3
"""What another zstd level would make of a segment file: decompresses its blocks (with the
file's dictionary, if it has one) and compresses each again at every level asked, printing the
bytes and the compress time against the file as stored (format: src/storage/segments/file.rs).
Usage: benches/segment_levels.py FILE.seg [LEVELS, default 1,2,3,6] [MAX_BLOCKS]
Needs the `zstandard` package (installed from PyPI when missing)."""
import struct
import subprocess
import sys
import time

try:
    import zstandard as zs
except ImportError:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "zstandard"])
    import zstandard as zs

path = sys.argv[1]
levels = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "1,2,3,6").split(",")]
max_blocks = int(sys.argv[3]) if len(sys.argv) > 3 else None
data = open(path, "rb").read()
if data[:8] != b"LOUPESEG" or data[-8:] != b"LOUPESEG":
    sys.exit(f"{path}: not a loupe segment file")
footer = data[-56:]
_index_offset, _index_len, dict_offset = struct.unpack_from("<QQQ", footer, 0)
(dict_len,) = struct.unpack_from("<I", footer, 24)
dictionary = data[dict_offset : dict_offset + dict_len]
zdict = zs.ZstdCompressionDict(dictionary) if dictionary else None
dec = zs.ZstdDecompressor(dict_data=zdict) if zdict else zs.ZstdDecompressor()
offset, blocks, stored = 8, [], 0
while offset < dict_offset and (max_blocks is None or len(blocks) < max_blocks):
    (length,) = struct.unpack_from("<I", data, offset)
    blocks.append(dec.decompress(data[offset + 8 : offset + 8 + length], max_output_size=64 << 20))
    stored += 8 + length
    offset += 8 + length
raw = sum(len(b) for b in blocks)
print(f"{path}: {len(blocks)} blocks, {raw / 2**20:.1f} MiB raw, {stored / 2**20:.1f} MiB stored, dictionary {dict_len} B")
for level in levels:
    c = zs.ZstdCompressor(level=level, dict_data=zdict) if zdict else zs.ZstdCompressor(level=level)
    t = time.perf_counter()
    n = sum(8 + len(c.compress(b)) for b in blocks)
    t = time.perf_counter() - t
    print(f"  level {level}: {n / 2**20:.1f} MiB ({n / stored:.3f} of stored), {t:.1f} s")
