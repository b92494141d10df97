#!/usr/bin/env python3
"""What a screenshot shows, for tests/report/test_report_screenshot.cpp: decodes a PNG with the
standard library only (zlib; 8-bit RGB or RGBA, not interlaced, as Chromium writes them) and
prints one JSON object: the size, the share of pixels that differ from the most common colour
(the page's background), and for each colour asked for how many pixels are close to it and in
how many distinct columns they lie (a long line covers many columns; a legend swatch few).

usage: png_colors.py FILE.png '#1f77b4' '#d62728' ...
"""
import json
import struct
import sys
import zlib
from collections import Counter

TOLERANCE = 40  # per channel: the core of an antialiased 2px line stays this close to its colour


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path}: not a PNG file")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace != 0:
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {color_type})")
    return width, height, 3 if color_type == 2 else 4, zlib.decompress(idat)


def unfilter_row(kind, line, previous, channels):
    """Undoes one row's PNG filter (none, sub, up, average, paeth) in place."""
    n = len(line)
    if kind == 1:
        for i in range(channels, n):
            line[i] = (line[i] + line[i - channels]) & 255
    elif kind == 2:
        for i in range(n):
            line[i] = (line[i] + previous[i]) & 255
    elif kind == 3:
        for i in range(n):
            left = line[i - channels] if i >= channels else 0
            line[i] = (line[i] + (left + previous[i]) // 2) & 255
    elif kind == 4:
        for i in range(channels):
            line[i] = (line[i] + previous[i]) & 255  # paeth(0, up, 0) is up
        for i in range(channels, n):
            a, b, c = line[i - channels], previous[i], previous[i - channels]
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255


def unfilter(width, height, channels, raw):
    """The image as rows of bytes."""
    stride = width * channels
    rows, previous, pos = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        unfilter_row(kind, line, previous, channels)
        rows.append(line)
        previous = line
    return rows


def pixels_of(row, channels):
    return zip(row[0::channels], row[1::channels], row[2::channels])


def main():
    path, wanted = sys.argv[1], [c.lstrip("#") for c in sys.argv[2:]]
    targets = [tuple(int(c[i:i + 2], 16) for i in (0, 2, 4)) for c in wanted]
    width, height, channels, raw = read_png(path)
    rows = unfilter(width, height, channels, raw)
    pixels = Counter()
    for row in rows:
        pixels.update(pixels_of(row, channels))
    # Judged per distinct colour rather than per pixel: a page has few of them.
    close = {rgb: [k for k, t in enumerate(targets)
                   if max(abs(a - b) for a, b in zip(rgb, t)) <= TOLERANCE] for rgb in pixels}
    counts = [0] * len(targets)
    columns = [set() for _ in targets]
    for row in rows:
        for x, rgb in enumerate(pixels_of(row, channels)):
            for k in close[rgb]:
                counts[k] += 1
                columns[k].add(x)
    background, most = pixels.most_common(1)[0]
    print(json.dumps({
        "width": width, "height": height,
        "background": "#%02x%02x%02x" % background,
        "non_background": 1.0 - most / (width * height),
        "distinct_colors": len(pixels),
        "colors": {"#" + c: {"pixels": counts[k], "columns": len(columns[k])}
                   for k, c in enumerate(wanted)},
    }))


if __name__ == "__main__":
    main()
