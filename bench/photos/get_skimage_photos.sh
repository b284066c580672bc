#!/usr/bin/env bash
# Copies the photographs Debian's scikit-image package ships (python3-skimage, skimage/data/) into
# DEST, without installing the package or its dependencies: apt-get download + dpkg -x. These
# ~5 MB are the sources make_photo_set cuts and re-encodes into the image bench's photo set.
#   bash bench/photos/get_skimage_photos.sh .photos
set -euo pipefail
dest=${1:?usage: get_skimage_photos.sh DEST}
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download python3-skimage >/dev/null 2>&1) ||
  { echo "apt-get download python3-skimage failed (run apt-get update first?)" >&2; exit 1; }
dpkg -x "$work"/python3-skimage_*.deb "$work/x"
data=$(find "$work/x" -type d -path '*/skimage/data' | head -1)
# Photographs only (not the synthetic test patterns): 9 colour, 6 grayscale.
for f in astronaut.png chelsea.png coffee.png motorcycle_left.png motorcycle_right.png rocket.jpg \
         retina.jpg hubble_deep_field.jpg ihc.png camera.png coins.png moon.png brick.png \
         grass.png gravel.png; do
  cp "$data/$f" "$dest/"
done
du -sh "$dest"
