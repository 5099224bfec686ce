#!/usr/bin/env bash
# Rebuilds the release image firmware/dist/nes_bridge_<board>.uf2 and its manifest from the
# pinned pico-sdk (firmware/README.md, "Rebuild"): PICO_SDK_PATH must be pico-sdk 2.2.0 with
# lib/tinyusb at the commit that tag pins. Byte-identical for the same sources, SDK,
# TinyUSB and compiler (no build date or path enters the image).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
board="${1:-pico}"
: "${PICO_SDK_PATH:?set PICO_SDK_PATH to a pico-sdk 2.2.0 checkout (firmware/README.md)}"
sdk_tag="$(git -C "$PICO_SDK_PATH" describe --tags --exact-match 2>/dev/null || echo unknown)"
sdk_commit="$(git -C "$PICO_SDK_PATH" rev-parse HEAD)"
tusb_commit="$(git -C "$PICO_SDK_PATH/lib/tinyusb" rev-parse HEAD)"
if [ "$sdk_tag" != "2.2.0" ] || [ "$tusb_commit" != "86ad6e56c1700e85f1c5678607a762cfe3aa2f47" ]; then
    echo "build.sh: warning: pico-sdk $sdk_tag / tinyusb $tusb_commit is not the pinned" \
        "2.2.0 / 86ad6e56...; the image will differ from the committed one" >&2
fi
build="$here/build/$board"
rm -rf "$build"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPICO_NO_PICOTOOL=1 \
    -DNB_BOARD="$board" -DPICO_SDK_PATH="$PICO_SDK_PATH" >/dev/null
cmake --build "$build"
mkdir -p "$here/dist"
uf2="$here/dist/nes_bridge_$board.uf2"
python3 "$here/tools/uf2.py" "$build/nes_bridge.bin" "$uf2"
python3 "$here/tools/uf2.py" --manifest "$uf2" "$here/dist/nes_bridge_$board.json" \
    --board "$board" --sdk-tag "$sdk_tag" --sdk-commit "$sdk_commit" \
    --tinyusb-commit "$tusb_commit" --compiler "$(arm-none-eabi-gcc --version | head -1)"
sha256sum "$uf2"
