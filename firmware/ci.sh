#!/usr/bin/env bash
# Firmware CI without the pico-sdk (see firmware/README.md, "Tests"):
#  1. the plain-C core (firmware/core) built for the host with ASan/UBSan and run
#     against firmware/protocol_vectors.json, with its bounded receiver fuzz;
#  2. the same core cross-compiled for the RP2040's Cortex-M0+ with
#     -Wall -Wextra -Werror, linked against newlib, and its time-critical
#     functions checked to sit in .time_critical (copied to SRAM by the SDK).
#  3. `npm ci` of the rp2040js harness (firmware/emu), so pytest can run the committed UF2
#     (tests/test_firmware_emu.py; tests/test_firmware_dist.py checks the UF2 is current).
# The PIO program and the virtual device are tested by pytest (tests/test_pio_*.py,
# tests/test_firmware_*.py). Exits non-zero on any failure; skips nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${FIRMWARE_CI_BUILD:-$here/build/ci}"
mkdir -p "$out"
cc="${CC:-cc}"
warn=(-std=c99 -Wall -Wextra -Werror -pedantic)

echo "== host build of the core + unit tests + fuzz ($cc, ASan/UBSan)"
"$cc" "${warn[@]}" -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all \
    -I"$here/core" "$here/core/nb_proto.c" "$here/tests/test_core.c" -o "$out/test_core"
"$out/test_core" "$here/protocol_vectors.json" "${FUZZ_ITERATIONS:-3000}"

echo "== cross-compile for Cortex-M0+ (arm-none-eabi-gcc)"
if ! command -v arm-none-eabi-gcc >/dev/null 2>&1; then
    echo "ERROR: arm-none-eabi-gcc not found; install it (Debian/Ubuntu:" \
        "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)" >&2
    exit 1
fi
arm=(arm-none-eabi-gcc -mcpu=cortex-m0plus -mthumb -Os "${warn[@]}"
    -ffunction-sections -fdata-sections
    '-DNB_RAMFUNC=__attribute__((section(".time_critical.nb_core")))')
for src in nb_proto nb_core; do
    "${arm[@]}" -c "$here/core/$src.c" -o "$out/$src.m0.o"
done
"${arm[@]}" -I"$here/core" -c "$here/tests/link_check.c" -o "$out/link_check.m0.o"
"${arm[@]}" --specs=nosys.specs -Wl,--gc-sections "$out/link_check.m0.o" "$out/nb_proto.m0.o" \
    "$out/nb_core.m0.o" -o "$out/link_check.elf"
arm-none-eabi-size "$out/nb_proto.m0.o" "$out/nb_core.m0.o"

for fn in nb_latch nb_poll; do
    if ! arm-none-eabi-objdump -t "$out/nb_core.m0.o" |
        grep -Eq "[[:space:]]\.time_critical\.nb_core[[:space:]].*[[:space:]]$fn\$"; then
        echo "ERROR: $fn is not in a .time_critical section" >&2
        exit 1
    fi
done
echo "time-critical functions in .time_critical: nb_latch nb_poll"
echo "== emulator harness (firmware/emu: rp2040js, pinned in package-lock.json)"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "ERROR: node/npm not found; install them (Debian/Ubuntu: apt-get install nodejs npm;" \
        "Node.js >= 18)" >&2
    exit 1
fi
(cd "$here/emu" && npm ci --no-audit --no-fund --loglevel=error)
node --check "$here/emu/harness.mjs"
echo "the emulated-firmware tests run under pytest: tests/test_firmware_emu.py"
echo "firmware ci: ok"
