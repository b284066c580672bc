#!/usr/bin/env bash
# Installs what gpufeed needs on Debian 12 / Ubuntu, only where missing. Run as root (or with
# sudo available). The CUDA Toolkit 13.0 is not a Debian package: when /usr/local/cuda is present
# it is used, otherwise gpufeed builds its host parts and says so.
set -euo pipefail
# The codec libraries decode HDF5 chunks; the python3/plugin packages write the codec tests'
# fixtures with h5py (hdf5plugin + Debian's filter plugins; python3-zstandard for Zstd frames).
# TurboJPEG and libspng decode images (the image component); libjpeg-turbo-progs'
# cjpeg/djpeg write the image tests' JPEGs and are their reference decoder.
# Open MPI (libopenmpi-dev, openmpi-bin) builds and launches examples/ddp_train.
# libcurl reads shards over HTTP(S) and libssl-dev's libcrypto signs requests to S3 (the remote
# component); nginx-light serves the remote tests' files with range support on the loopback
# interface, and openssl makes their HTTPS test's certificate.
packages=(build-essential cmake pkg-config libhdf5-dev liblmdb-dev doctest-dev zlib1g-dev
          libcli11-dev nlohmann-json3-dev libdlpack-dev libdeflate-dev liblz4-dev libzstd-dev libblosc-dev
          python3-h5py python3-hdf5plugin hdf5-filter-plugin bitshuffle
          hdf5-filter-plugin-blosc-serial python3-zstandard libnuma-dev
          libturbojpeg0-dev libspng-dev libjpeg-turbo-progs
          libopenmpi-dev openmpi-bin
          libcurl4-openssl-dev libssl-dev openssl nginx-light)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gpufeed setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi
