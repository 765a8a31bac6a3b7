#!/usr/bin/env python3
"""tools/ipu_images.py: a written file reads back the same, has the documented
layout byte for byte, and damaged files (truncated, trailing bytes, a label out
of range, no magic) raise DamagedFile naming the byte. Exit 0 when all pass."""
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import ipu_images  # noqa: E402


def main():
    failures = []
    records = [(i % 3, bytes((i * 7 + j) % 256 for j in range(2 * 4 * 5))) for i in range(11)]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.ipuimg")
        ipu_images.write(path, channels=2, height=4, width=5, classes=3, records=records)
        data = open(path, "rb").read()
        expected = b"IPUIMG1\n" + struct.pack("<5I", 2, 4, 5, 3, 11) + b"".join(struct.pack("<I", l) + p for l, p in records)
        if data != expected:
            failures.append("the written bytes are not the documented layout")
        header, back = ipu_images.read(path)
        if header != dict(channels=2, height=4, width=5, classes=3, count=11) or back != records:
            failures.append("the file does not read back as written")
        bad_label = bytearray(data)
        bad_label[28 + 2 * 44] = 7
        damaged = {"truncated": data[:-5], "trailing bytes": data + b"x", "label out of range": bytes(bad_label),
                   "no magic": b"JPEG" + data[4:], "header cut": data[:20]}
        for what, content in damaged.items():
            open(path, "wb").write(content)
            try:
                ipu_images.read(path)
                failures.append(f"{what}: accepted")
            except ipu_images.DamagedFile as e:
                if "byte" not in str(e):
                    failures.append(f"{what}: the message names no byte: {e}")
        try:
            ipu_images.write(path, 2, 4, 5, 3, [(3, bytes(40))])
            failures.append("a label out of range was written")
        except ValueError:
            pass
    for f in failures:
        print("FAIL:", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
