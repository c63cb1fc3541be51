#!/usr/bin/env python3
"""Renders text images for the OCR accuracy tests (tests/ocr): text lines for the recogniser and the
direction classifier, and pages for the detector, with Debian's DejaVu Sans (fonts-dejavu-core) and
python3-pil. Every character drawn is in the recogniser's keys file (e.g. PaddleOCR's
ppocr_keys_v1.txt) and has a glyph in the font. Deterministic: the same --seed draws the same images.

  render_text_images.py --keys ppocr_keys_v1.txt --kind line --count 32 --seed 1 OUT_DIR
  render_text_images.py --keys ppocr_keys_v1.txt --kind page --count 8 --seed 1 OUT_DIR

--kind line writes OUT_DIR/line_NNN.png (48 px high, 100..320 px wide, dark text on light paper) and
OUT_DIR.labels.tsv (one "file<TAB>text<TAB>angle" per line); --flip-every K rotates every K-th line by 180
degrees (the classifier's second class). --kind page writes 640x640 pages of several lines.
"""
import argparse
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
WORDS = ("invoice total amount payment email address date order number price customer account "
         "balance due paid receipt tax shipping phone name city street model serial page item "
         "quantity unit discount bank card store open close from to reference status").split()


def drawable(keys, font):
    """Characters of the keys file the font can draw (one printable character per entry)."""
    out = set()
    for k in keys:
        if len(k) == 1 and k.isprintable() and not k.isspace() and font.getmask(k).getbbox() is not None:
            out.add(k)
    return out


def phrase(rng, chars):
    """A short phrase of words, numbers and prices, restricted to `chars` (plus spaces)."""
    parts = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.55:
            w = rng.choice(WORDS)
            w = w.capitalize() if rng.random() < 0.4 else w
        elif r < 0.8:
            w = str(rng.randint(0, 99999))
        else:
            w = "%d.%02d" % (rng.randint(0, 999), rng.randint(0, 99))
        parts.append("".join(c for c in w if c in chars))
    return " ".join(p for p in parts if p) or "0"


def render_line(rng, text, font_size):
    font = ImageFont.truetype(FONT, font_size)
    left, top, right, bottom = font.getbbox(text)
    pad = rng.randint(4, 10)
    w, h = right - left + 2 * pad, bottom - top + 2 * pad
    paper = tuple(rng.randint(215, 255) for _ in range(3))
    ink = tuple(rng.randint(0, 60) for _ in range(3))
    img = Image.new("RGB", (w, h), paper)
    ImageDraw.Draw(img).text((pad - left, pad - top), text, font=font, fill=ink)
    # The recogniser's input is 48 px high and at most 320 wide (PaddleOCR resizes keeping the ratio).
    nw = max(16, min(320, round(w * 48 / h)))
    return img.resize((nw, 48), Image.BILINEAR)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--keys", required=True)
    ap.add_argument("--kind", choices=["line", "page"], required=True)
    ap.add_argument("--count", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--flip-every", type=int, default=0)
    a = ap.parse_args()
    with open(a.keys, encoding="utf-8") as f:
        keys = [line.rstrip("\r\n") for line in f]
    chars = drawable(keys, ImageFont.truetype(FONT, 32))
    if len(chars) < 20:
        sys.exit("render_text_images.py: the font draws only %d characters of %s" % (len(chars), a.keys))
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    labels = []
    for i in range(a.count):
        if a.kind == "line":
            text = phrase(rng, chars)
            img = render_line(rng, text, rng.randint(28, 40))
            flipped = a.flip_every > 0 and i % a.flip_every == a.flip_every - 1
            if flipped:
                img = img.rotate(180)
            name = "line_%03d.png" % i
            labels.append("%s\t%s\t%s" % (name, text, "180" if flipped else "0"))
        else:
            img = Image.new("RGB", (640, 640), tuple(rng.randint(225, 255) for _ in range(3)))
            draw = ImageDraw.Draw(img)
            y = rng.randint(10, 40)
            lines = []
            while y < 580:
                size = rng.randint(18, 36)
                font = ImageFont.truetype(FONT, size)
                text = phrase(rng, chars)
                x = rng.randint(10, 200)
                draw.text((x, y), text, font=font, fill=tuple(rng.randint(0, 60) for _ in range(3)))
                lines.append(text)
                y += size + rng.randint(12, 40)
            name = "page_%03d.png" % i
            labels.append("%s\t%s" % (name, " | ".join(lines)))
        img.save(os.path.join(a.out, name))
    # Next to the folder, not in it: every file in a calibration folder must be a sample.
    with open(a.out.rstrip("/") + ".labels.tsv", "w", encoding="utf-8") as f:
        f.write("\n".join(labels) + "\n")


if __name__ == "__main__":
    main()
