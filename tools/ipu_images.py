#!/usr/bin/env python3
"""Reader and writer of the emulator's image files (docs/emulator.md, "Image files").

Layout, all integers little-endian: the magic b"IPUIMG1\\n"; five uint32
(channels, height, width, classes, count); then per record a uint32 label
(< classes) and channels*height*width uint8 pixels, channel-major then
row-major. Pure Python (no NumPy needed); images are bytes objects of the
record's pixels, or anything bytes() accepts (a uint8 NumPy array's
.tobytes() in C order of [channels, height, width]).

    import ipu_images
    ipu_images.write("pics.ipuimg", channels=3, height=32, width=32, classes=10,
                     records=[(label, pixels), ...])
    header, records = ipu_images.read("pics.ipuimg")

Run as a script, it checks a file and prints its header and class counts:

    python3 tools/ipu_images.py FILE
"""
import os
import struct
import sys
import tempfile

MAGIC = b"IPUIMG1\n"
HEADER = struct.Struct("<5I")


class DamagedFile(ValueError):
    """The file is not a well-formed image file; the message gives the byte offset."""


def write(path, channels, height, width, classes, records):
    """Writes records [(label, pixels)] atomically (a temporary file, then a rename)."""
    n = channels * height * width
    records = list(records)
    body = [MAGIC, HEADER.pack(channels, height, width, classes, len(records))]
    for i, (label, pixels) in enumerate(records):
        pixels = bytes(pixels)
        if not 0 <= label < classes:
            raise ValueError(f"record {i}: label {label} is not below {classes}")
        if len(pixels) != n:
            raise ValueError(f"record {i}: {len(pixels)} pixels, expected {n}")
        body += [struct.pack("<I", label), pixels]
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ipu_images_")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(body))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read(path):
    """Returns ({channels, height, width, classes, count}, [(label, pixels)]); raises DamagedFile."""
    data = open(path, "rb").read()
    if data[:8] != MAGIC:
        raise DamagedFile(f"{path}, byte 0: not an image file (no magic)")
    if len(data) < 8 + HEADER.size:
        raise DamagedFile(f"{path}, byte {len(data)}: the header is truncated")
    channels, height, width, classes, count = HEADER.unpack_from(data, 8)
    n = channels * height * width
    record = 4 + n
    expected = 8 + HEADER.size + count * record
    if len(data) != expected:
        raise DamagedFile(f"{path}, byte {min(len(data), expected)}: {len(data)} bytes, the header implies {expected}")
    records = []
    for i in range(count):
        at = 8 + HEADER.size + i * record
        (label,) = struct.unpack_from("<I", data, at)
        if label >= classes:
            raise DamagedFile(f"{path}, byte {at}: record {i} has label {label}, but there are {classes} classes")
        records.append((label, data[at + 4:at + record]))
    header = dict(channels=channels, height=height, width=width, classes=classes, count=count)
    return header, records


def main():
    if len(sys.argv) != 2:
        print("usage: ipu_images.py FILE", file=sys.stderr)
        return 2
    try:
        header, records = read(sys.argv[1])
    except (OSError, DamagedFile) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    counts = [0] * header["classes"]
    for label, _ in records:
        counts[label] += 1
    print(" ".join(f"{k} {v}" for k, v in header.items()))
    print("per class:", " ".join(str(c) for c in counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
