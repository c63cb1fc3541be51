#!/bin/bash
# Installs the Debian 12 packages npusim needs to build, test and run its scripts (as root); chromium and
# python3-pil are for the HTML report's browser test (tests/e2e/browser_check.py).
# python3-pil and fonts-dejavu-core also render the text images the OCR accuracy tests feed (tests/ocr).
# ccache makes rebuilds fast (CMakeLists.txt uses it when present); clang-format is the reference formatter
# that the format test checks the tree against (scripts/check_format.sh).
# Installs only what is missing, so a second run takes a second.
set -euo pipefail
packages=(
  build-essential cmake pkg-config git ccache clang-format
  libsystemc-dev libboost-program-options-dev libfmt-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata libpng-dev libjpeg-dev
  libssl-dev libjemalloc-dev
  python3-numpy python3-onnx python3-torch python3-torchvision python3-matplotlib
  chromium python3-pil fonts-dejavu-core
  slurm-wlm munge
)
# Node.js and npm run the onnxruntime golden check. A machine that already has them (e.g. NodeSource's
# nodejs, which bundles npm and conflicts with Debian's npm package) keeps its own.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
