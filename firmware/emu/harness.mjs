// The committed firmware image running in rp2040js, between a simulated NES and a host.
//
//   node firmware/emu/harness.mjs --uf2 firmware/dist/nes_bridge_pico.uf2 [options]
//
// - The RP2040: rp2040js (npm, pinned in package.json), no boot ROM. The image calls no
//   ROM function (firmware/CMakeLists.txt), so the harness does what boot2 would: with
//   XIP already readable it starts the core at the image's vector table (0x10000100).
//   No boot ROM code is loaded; the ROM region is read-only as on the chip (rp2040js would
//   let a stray write change it) and reads zeros, except word 0: the ROM vector table's
//   initial stack pointer, 0x20041F00 (pico-bootrom bootrom.ld, _stacktop), which is what a
//   read through a NULL pointer gets on the chip (firmware/src/usb_guard.c).
// - The pads are left as rp2040js resets them (input buffers disabled): the firmware must
//   enable LATCH and CLOCK itself (defect 6).
// - The PIO is stepped by this loop (rp2040js would otherwise run it from timers,
//   unrelated to CPU time): once per CPU cycle, its enabled state machines only, from each
//   NES edge until PIO_HOLD_NS after it; in between it is held. Between edges the
//   nes4021 program only polls its inputs (idle, latch_high, clk_poll loops), so holding
//   it changes nothing it does; it saves most of the run time. rp2040js does not emulate
//   PIO delay cycles or the clock divider: every PIO instruction takes one step.
// - The NES: LATCH (GPIO 2, both ports: the console's OUT0), port 1's CLOCK (GPIO 3) and
//   port 2's (GPIO 5) driven, port 1's DATA (GPIO 4) and port 2's (GPIO 6) sampled, with the
//   timing of Dr. Mario's controller read (disassembly: getInputs [$B7E1] calls
//   get_CTRL_inputs [$B7AD] twice per NMI, in every mode, one player or two):
//   `stx $4016` (1) / `dex` / `stx $4016` (0): LATCH high 6 CPU cycles; then 8 rounds of a
//   41-cycle loop, each with `lda $4016` (port 1's CLOCK low for one CPU cycle, DATA
//   sampled at the end of that cycle, low = pressed) and, 18 cycles later (lsr, rol zp,
//   lsr, rol zp between), `lda $4017` (port 2's, the same way); the second read's latch 99
//   cycles after the first's last port-1 clock. NTSC CPU cycle 558.7 ns.
// - The host: a TCP server on 127.0.0.1 bridged to the emulated USB CDC (rp2040js's
//   USBCDC). A connected client is DTR high; its disconnect is DTR low (port close).
//   Python's pyserial opens it as "socket://127.0.0.1:PORT" (hil.link.Link does).
//
// Time: all times are emulated. --cpu-mhz sets the emulated CPU clock seen by the
// instruction loop (the firmware programs 125 MHz; a lower value here gives the firmware
// fewer instructions per emulated microsecond, a harder test of its main-loop deadlines
// and a faster run). --frame-us spaces NES frames (default 16639 us, NTSC); closer spacing
// only shortens the idle time between frames (the firmware groups latches by its latch
// window, set by the host with CONFIG, and never depends on the frame rate otherwise).
//
// stdout, one line each: "READY <port>" once USB is enumerated and the server listens;
// "F <frame> <read1> <read2> <port2 read1> <port2 read2>" per NES frame (hex bytes, port 1's
// then port 2's, 1 = pressed, A = 0x80);
// "E <event> <frame> <t_us>" for events; "DONE <json>" at the end.
// stdin, one line each: "usb unmount" (bus reset), "usb unmount-after-out" (a bus reset
// right after the next CDC OUT completion), "usb unplug" (port gone + bus reset),
// "usb suspend", "usb resume", "nes stop", "nes start", "quit"; with --nes-stopped the NES
// plays no frame until "nes start"; in --lockstep mode
// "frame N" plays N more NES frames. In --driven mode there is no free-running NES: the
// caller drives the firmware clock, "adv US" runs to firmware time US (answer "A US") and
// "read US" does one controller read there (answer "R <byte> <t_us> <port2 byte>"; "plan US..." (answer
// "A <now>") and numbers after either command's own plan reads ahead, made at their time
// even while the emulation serves the host); while no command is pending the emulation runs only to serve
// the host's bytes (hil.link.vdevice.EmulatedFirmware,
// the device of `hil run --fast --firmware`).

import { createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { RP2040, USBCDC, GPIOPinState } from 'rp2040js';

const args = parseArgs(process.argv.slice(2));
const CPU_MHZ = Number(args['cpu-mhz'] ?? 125);
const CYCLE_NS = 1000 / CPU_MHZ;
const NES_NS = 1e9 / 1789773; // NTSC 2A03 CPU cycle
const FRAME_NS = Number(args['frame-us'] ?? 16639) * 1000;
const MAX_FRAMES = Number(args.frames ?? Infinity);
const LOCKSTEP = 'lockstep' in args;
const MAX_EMU_S = Number(args['max-emu-s'] ?? 600);
const PIN_LATCH = 2, PIN_CLOCK = 3, PIN_DATA = 4, PIN_CLOCK2 = 5, PIN_DATA2 = 6;
const PORT2_DELAY = 18; // CPU cycles from a $4016 read to the $4017 read (get_CTRL_inputs)
const PIO_HOLD_NS = Number(args['pio-hold-ns'] ?? 4000);

function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) throw new Error(`unexpected argument ${argv[i]}`);
    const key = argv[i].slice(2);
    if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) out[key] = argv[++i];
    else out[key] = true;
  }
  return out;
}

function say(line) {
  process.stdout.write(line + '\n');
}

// ---- the RP2040 -------------------------------------------------------------------------

function loadUF2(mcu, data) {
  let blocks = 0;
  for (let off = 0; off + 512 <= data.length; off += 512) {
    const v = new DataView(data.buffer, data.byteOffset + off, 512);
    if (v.getUint32(0, true) !== 0x0a324655 || v.getUint32(4, true) !== 0x9e5d5157) {
      throw new Error(`UF2 block ${blocks}: bad magic`);
    }
    if (v.getUint32(28, true) !== 0xe48bff56) throw new Error('not an RP2040 UF2');
    const addr = v.getUint32(12, true), size = v.getUint32(16, true);
    if (addr < 0x10000000 || addr + size > 0x10000000 + mcu.flash.length) {
      throw new Error(`UF2 block ${blocks}: address 0x${addr.toString(16)} outside flash`);
    }
    mcu.flash.set(data.subarray(off + 32, off + 32 + size), addr - 0x10000000);
    blocks++;
  }
  return blocks;
}

const mcu = new RP2040();
mcu.logger = { debug() {}, info() {}, warn(c, m) { say(`E warn 0 0 ${c}:${m}`.replace(/\n/g, ' ')); }, error(c, m) { say(`E error 0 0 ${c}:${m}`.replace(/\n/g, ' ')); } };
const uf2Blocks = loadUF2(mcu, readFileSync(args.uf2));
const watchdog = mcu.peripherals[0x40058];
if ('boot-after-uf2-copy' in args) {
  // What the boot ROM leaves after a UF2 copy: it reboots through the watchdog, so
  // REASON says TIMER, but the watchdog_enable() magic in scratch[4] is not there.
  watchdog.reason = 1;
}
if ('boot-after-watchdog' in args) {
  // A timeout of the watchdog the firmware enabled (pico-sdk watchdog_enable() writes
  // WATCHDOG_NON_REBOOT_MAGIC, 0x6ab73121, into scratch[4] first).
  watchdog.reason = 1;
  watchdog.scratchData[4] = 0x6ab73121;
}
// The boot ROM (see the header): read-only, word 0 the initial SP of its vector table.
mcu.bootrom[0] = 0x20041f00;
for (const name of ['writeUint32', 'writeUint16', 'writeUint8']) {
  const write = mcu[name].bind(mcu);
  mcu[name] = (address, value) => {
    if ((address >>> 0) >= mcu.bootrom.length * 4) write(address, value);
  };
}
mcu.core.VTOR = 0x10000100;
mcu.core.reset(); // SP and PC from the image's vector table (what boot2 ends with)

const pio0 = mcu.pio[0];
pio0.run = () => {}; // stepped by this loop, once per CPU cycle
const gpio = mcu.gpio;
gpio[PIN_LATCH].setInputValue(false);
gpio[PIN_CLOCK].setInputValue(true);
gpio[PIN_CLOCK2].setInputValue(true);

function dataPressed(pin) {
  // DATA is open drain: low (driven) = pressed; released = pulled up = not pressed.
  return gpio[pin].value === GPIOPinState.Low;
}

// ---- USB CDC <-> TCP ----------------------------------------------------------------------

// rp2040js 1.4.1 leaves SIE_STATUS.SUSPENDED out of its write-1-to-clear bits (on the
// chip it is WC, RP2040 datasheet 4.1.4), so a suspend would interrupt forever: clear it
// here when the firmware writes it.
{
  const usb = mcu.usbCtrl, write = usb.writeUint32.bind(usb), SUSPENDED = 1 << 4;
  usb.writeUint32 = (offset, value) => {
    write(offset, value);
    if (offset === 0x50 && usb.rawWriteValue & SUSPENDED) {
      usb.sieStatus &= ~SUSPENDED;
      usb.sieStatusUpdated();
    }
  };
}

const cdc = new USBCDC(mcu.usbCtrl);
let serveUntil = 0;
let usbReady = false, client = null, fromHost = [], hostBytesFrom = 0;
// A bus reset (SIE_BUS_RESET) ends the transfers on the endpoints of the configuration it
// removes: the host sends them no more tokens (and this host never configures the device
// again). rp2040js 1.4.1 still completes OUT reads armed before the reset 10 us later (and
// delivers IN bytes already armed), and TinyUSB, whose reset handler deactivated those
// endpoints, panics on such a completion ("Can't continue xfer on inactive ep",
// dcd_rp2040.c hw_handle_buff_status). So from the reset on, only endpoint 0 has traffic.
//
// SET_CONTROL_LINE_STATE (DTR) one control transfer at a time, in order, as a real host
// does: the next SETUP only after the device's status stage (its zero-length IN on endpoint
// 0). rp2040js's USBCDC sends each SETUP at once, so its own DTR|RTS at configuration, the
// harness's "no port open" right after it and a port open 19 us later overlapped, and the
// firmware could end with DTR low while the port was open: it then dropped its replies and
// a Hello went unanswered (about 1 connection in 8 on a loaded machine with firmware 1.1.1).
// After a bus reset the device is not configured, so no class request goes to it.
let busWasReset = false;
let lineBusy = false, lineSent = 0;
const lineQueue = [];
function setLineState(value) {
  if (busWasReset) return;
  if (lineBusy) {
    lineQueue.push(value);
    return;
  }
  lineBusy = true;
  lineSent = value;
  cdc.cdcSetControlLineState(value);
}
function lineStateDone() {
  lineBusy = false;
  // The host's bytes wait until the firmware has DTR high (an OS raises DTR when a program
  // opens the port, before the program can write); 500 us for its ACK stage.
  if (lineSent & 1 && client && lineQueue.length === 0) hostBytesFrom = mcu.clock.nanos + 500_000;
  if (lineQueue.length) setLineState(lineQueue.shift());
}
{
  const usb = mcu.usbCtrl, read = usb.onEndpointRead, write = usb.onEndpointWrite;
  usb.onEndpointRead = (ep, size) => {
    if (ep === 0 || !busWasReset) read(ep, size);
  };
  usb.onEndpointWrite = (ep, buf) => {
    const statusStage = ep === 0 && buf.length === 0 && lineBusy;
    if (ep === 0 || !busWasReset) write(ep, buf);
    if (statusStage) lineStateDone();
  };
}
function busReset() {
  const usb = mcu.usbCtrl;
  busWasReset = true;
  lineBusy = false;
  lineQueue.length = 0;
  for (const alarms of [usb.endpointReadAlarms, usb.endpointWriteAlarms]) {
    for (let ep = 1; ep < alarms.length; ep++) alarms[ep].buffers = [];
  }
  usb.sieStatus |= 1 << 19; // SIE_BUS_RESET
  usb.sieStatusUpdated();
}
// "usb unmount-after-out": the bus reset lands right after the next CDC OUT transfer
// completes, with its transfer-complete interrupt still pending: TinyUSB's bus-reset race
// made certain (firmware/src/usb_guard.c), where a plain "usb unmount" lands anywhere. With
// no OUT completion within 5 ms of emulated time (no read armed: suspended, after a reset,
// receive buffer full) the reset lands then, after an event "no_out_completion".
let resetAfterOut = false, resetAfterOutBy = 0;
{
  const usb = mcu.usbCtrl, finish = usb.finishRead.bind(usb);
  usb.finishRead = (ep, buffer) => {
    finish(ep, buffer);
    if (resetAfterOut && ep === cdc.outEndpoint) {
      resetAfterOut = false;
      busReset();
      event('usb_reset');
    }
  };
}
cdc.onDeviceConnected = () => {
  usbReady = true;
  // rp2040js has just sent DTR|RTS itself; then "no host has the port open yet".
  lineBusy = true;
  lineSent = 3;
  setLineState(0);
  event('usb_configured');
};
cdc.onSerialData = (buf) => {
  if (client) client.write(Buffer.from(buf));
};

const server = createServer((sock) => {
  if (client) {
    sock.destroy();
    return;
  }
  client = sock;
  sock.setNoDelay(true);
  hostBytesFrom = Infinity; // until the firmware has DTR (lineStateDone)
  setLineState(3); // DTR | RTS: port open
  event('port_open');
  sock.on('data', (d) => {
    for (const b of d) fromHost.push(b);
    serveUntil = mcu.clock.nanos + 3_000_000; // run on a while so the replies go out
  });
  sock.on('close', () => {
    client = null;
    fromHost = [];
    setLineState(0); // DTR low: port closed
    event('port_close');
  });
  sock.on('error', () => {});
});

// ---- the NES ------------------------------------------------------------------------------

// One frame's edges (ns from the frame's start) for Dr. Mario's two controller reads, both
// ports: [time, what, read (0 or 1)]; in time order.
const EDGES_PER_READ = 2 + 6 * 8;
function frameEdges() {
  const e = [];
  let t = 0;
  for (let read = 0; read < 2; read++) {
    e.push([t, 'latch', 1]);
    e.push([t + 6 * NES_NS, 'latch', 0]);
    let c = t + (6 + 5) * NES_NS; // first $4016 read cycle, 5 cycles after LATCH falls
    for (let bit = 0; bit < 8; bit++) {
      e.push([c, 'clock', 0]);
      e.push([c + NES_NS - 1, 'sample', read]); // CPU latches D0 at the end of the cycle
      e.push([c + NES_NS, 'clock', 1]);
      const c2 = c + PORT2_DELAY * NES_NS; // the $4017 read of the same round
      e.push([c2, 'clock2', 0]);
      e.push([c2 + NES_NS - 1, 'sample2', read]);
      e.push([c2 + NES_NS, 'clock2', 1]);
      if (bit < 7) c += 41 * NES_NS;
    }
    t = c + 99 * NES_NS;
  }
  return e;
}
const DRIVEN = 'driven' in args;
// --driven: the caller drives time and the reads ("adv US", "read US" on stdin), as
// hil.consoles.sim's simulated console does with hil.link.vdevice.VirtualDevice; one read each.
const EDGES = DRIVEN ? frameEdges().slice(0, EDGES_PER_READ) : frameEdges();
// Driven reads are planned ahead ("plan US..." or numbers after a command): the emulation
// serving the host's bytes between two of the caller's commands runs the firmware clock on
// (serveUntil), and a read asked for after that had passed its time was made late, up to
// 9 ms, more on a loaded machine (the latches then came at uneven times and `hil run --fast
// --firmware` lost the frame clock: 268 desyncs). A planned read is made at its own time
// whatever runs the clock there, like a console's latch, which waits for no host.
const plans = []; // firmware us of reads not yet begun, ascending
const results = new Map(); // firmware us of a planned read -> [byte, start us]
let readingUs = null;
function addPlan(us) {
  if (!Number.isFinite(us) || results.has(us) || us === readingUs || plans.includes(us)) return;
  let i = plans.length;
  while (i > 0 && plans[i - 1] > us) i--;
  plans.splice(i, 0, us);
}

// --nes-stopped: no frame until "nes start" (a test host configures the window first).
let nesOn = !LOCKSTEP && !DRIVEN && !('nes-stopped' in args), nesFrame = -1, frameStart = 0, edgeIdx = EDGES.length;
let nextFrameAt = Infinity, lockstepPending = 0;
// "gate N": NES frames after N wait (emulated time runs on, no latch) until a later gate
// lets them start: a test's host then cannot fall behind the NES however slow its machine.
let gate = Infinity, gated = false;
const reads = [0, 0], bits = [0, 0], reads2 = [0, 0]; // reads2: port 2
let framesDone = 0;

function nextEventNs() {
  if (edgeIdx < EDGES.length) return frameStart + EDGES[edgeIdx][0];
  return DRIVEN && plans.length ? plans[0] * 1000 : nextFrameAt;
}

function nesEvent(now) {
  if (edgeIdx >= EDGES.length && DRIVEN) {
    // a planned read begins (at once if the one before it ran past its time)
    readingUs = plans.shift();
    frameStart = Math.max(now, clock.nanos);
    edgeIdx = 0;
    reads[0] = reads2[0] = 0;
    return;
  }
  if (edgeIdx >= EDGES.length) {
    // start a frame
    nextFrameAt = Infinity;
    nesFrame++;
    frameStart = now;
    edgeIdx = 0;
    reads[0] = reads[1] = reads2[0] = reads2[1] = 0;
    bits[0] = bits[1] = 0;
    return;
  }
  const [, what, v] = EDGES[edgeIdx++];
  if (what === 'latch') gpio[PIN_LATCH].setInputValue(!!v);
  else if (what === 'clock') gpio[PIN_CLOCK].setInputValue(!!v);
  else if (what === 'clock2') gpio[PIN_CLOCK2].setInputValue(!!v);
  else if (what === 'sample2') reads2[v] = ((reads2[v] << 1) | (dataPressed(PIN_DATA2) ? 1 : 0)) & 0xff;
  else {
    reads[v] = (reads[v] << 1) | (dataPressed(PIN_DATA) ? 1 : 0);
    bits[v]++;
  }
  if (edgeIdx >= EDGES.length && DRIVEN) {
    results.set(readingUs, [reads[0], Math.round(frameStart / 1000), reads2[0]]);
    readingUs = null;
    return;
  }
  if (edgeIdx >= EDGES.length) {
    say(`F ${nesFrame} ${hex(reads[0])} ${hex(reads[1])} ${hex(reads2[0])} ${hex(reads2[1])}`);
    framesDone++;
    if (LOCKSTEP) {
      if (lockstepPending > 0) lockstepPending--;
      nextFrameAt = lockstepPending > 0 ? frameStart + FRAME_NS : Infinity;
    } else {
      nextFrameAt = nesOn && framesDone < MAX_FRAMES ? frameStart + FRAME_NS : Infinity;
      if (nextFrameAt !== Infinity && nesFrame + 1 > gate) {
        gated = true;
        nextFrameAt = Infinity;
      }
    }
  }
}

function hex(b) {
  return b.toString(16).padStart(2, '0');
}

function event(name) {
  say(`E ${name} ${nesFrame} ${Math.round(mcu.clock.nanos / 1000)}`);
}

// ---- the run ----------------------------------------------------------------------------

const core = mcu.core, clock = mcu.clock;
let cycles = 0, pioUntil = 0, pioSteps = 0;
const machines = pio0.machines;

function stepPio(n) {
  for (let i = 0; i < n; i++) {
    for (let m = 0; m < 4; m++) if (machines[m].enabled) machines[m].step();
    pio0.checkChangedPins();
  }
  pioSteps += n;
}

function runSlice(sliceNs) {
  const end = clock.nanos + sliceNs;
  while (clock.nanos < end) {
    const evAt = nextEventNs();
    if (clock.nanos >= evAt) {
      nesEvent(evAt);
      pioUntil = clock.nanos + PIO_HOLD_NS;
      continue;
    }
    if (core.waiting) {
      // WFI/WFE: jump to the next alarm or NES edge.
      const dt = Math.max(CYCLE_NS, Math.min(clock.nanosToNextAlarm, evAt - clock.nanos, end - clock.nanos));
      if (clock.nanos < pioUntil) stepPio(Math.ceil(dt / CYCLE_NS));
      clock.tick(dt);
      continue;
    }
    const c = core.executeInstruction();
    cycles += c;
    if (clock.nanos + c * CYCLE_NS < evAt && clock.nanos >= pioUntil) {
      clock.tick(c * CYCLE_NS);
      continue;
    }
    // Cycle by cycle: an instruction can take many cycles (exception entry), and a NES
    // edge inside it must reach the PIO at its own time, not after the instruction.
    for (let i = 0; i < c; i++) {
      clock.tick(CYCLE_NS);
      while (clock.nanos >= nextEventNs()) {
        nesEvent(nextEventNs());
        pioUntil = clock.nanos + PIO_HOLD_NS;
      }
      if (clock.nanos < pioUntil) stepPio(1);
    }
  }
  if (resetAfterOut && clock.nanos >= resetAfterOutBy) {
    resetAfterOut = false;
    event('no_out_completion');
    busReset();
    event('usb_reset');
  }
  // Host bytes into the CDC OUT endpoint FIFO (rp2040js's USBCDC holds 512).
  while (fromHost.length && clock.nanos >= hostBytesFrom && cdc.txFIFO.itemCount < cdc.txFIFO.size) {
    cdc.sendSerialByte(fromHost.shift());
  }
}

const rl = createInterface({ input: process.stdin });
let quit = false;
const driven = [];
rl.on('line', (line) => {
  const w = line.trim().split(/\s+/);
  if (w[0] === 'quit') quit = true;
  else if (DRIVEN && (w[0] === 'adv' || w[0] === 'read' || w[0] === 'plan')) {
    // numbers after the command's own are reads planned from now on (above)
    for (const us of w.slice(w[0] === 'plan' ? 1 : 2)) addPlan(Number(us));
    if (w[0] !== 'plan') driven.push([w[0], Number(w[1])]);
    else say(`A ${Math.round(clock.nanos / 1000)}`); // planned before any host byte after it
  }
  else if (w[0] === 'gate') {
    gate = Number(w[1]);
    if (gated && nesFrame + 1 <= gate) {
      gated = false;
      nextFrameAt = Math.max(clock.nanos, frameStart + FRAME_NS);
    }
  }
  else if (w[0] === 'usb' && w[1] === 'unplug') {
    if (client) client.destroy(); // the host's port goes away
    busReset(); // and the device sees a bus reset
    event('usb_unplug');
  }
  else if (w[0] === 'frame' && LOCKSTEP) {
    lockstepPending += Number(w[1] ?? 1);
    if (nextFrameAt === Infinity && edgeIdx >= EDGES.length) nextFrameAt = clock.nanos;
  } else if (w[0] === 'nes' && w[1] === 'stop') {
    nesOn = false;
    event('nes_stop');
  } else if (w[0] === 'nes' && w[1] === 'start') {
    nesOn = true;
    if (nextFrameAt === Infinity && edgeIdx >= EDGES.length) nextFrameAt = clock.nanos;
    event('nes_start');
  } else if (w[0] === 'usb' && w[1] === 'unmount-after-out') {
    resetAfterOut = true;
    resetAfterOutBy = mcu.clock.nanos + 5_000_000;
  } else if (w[0] === 'usb' && w[1] === 'unmount') {
    // A bus reset now (the host's port reset / re-plug): the device is unconfigured.
    busReset();
    event('usb_reset');
  } else if (w[0] === 'usb' && (w[1] === 'suspend' || w[1] === 'resume')) {
    const SUSPENDED = 1 << 4, RESUME = 1 << 11;
    if (w[1] === 'suspend') mcu.usbCtrl.sieStatus |= SUSPENDED;
    else mcu.usbCtrl.sieStatus = (mcu.usbCtrl.sieStatus & ~SUSPENDED) | RESUME;
    mcu.usbCtrl.sieStatusUpdated();
    event(`usb_${w[1]}`);
  }
});
rl.on('close', () => {
  quit = true;
});

const t0 = Date.now();
let listening = false;

// Driven mode: run to the caller's device time (us on the firmware clock); an "adv" to a time
// already passed (USB service ran the clock on) is answered at once; a read is answered when
// made (at its planned time, or now if it was not planned).
async function runDriven() {
  const cmd = driven.shift();
  if (cmd) {
    const [what, us] = cmd;
    if (what === 'read') addPlan(us); // a read not planned is made now (late if its time passed)
    while (clock.nanos < us * 1000 || (what === 'read' && !results.has(us))) {
      const left = us * 1000 - clock.nanos;
      runSlice(left > 0 ? Math.min(200_000, left) : 20_000);
      if ((clock.nanos / 1000) % 1000 < 200) await new Promise((res) => setImmediate(res));
    }
    if (what === 'read') {
      const [byte, startUs, byte2] = results.get(us);
      results.delete(us);
      say(`R ${hex(byte)} ${startUs} ${hex(byte2)}`);
    } else {
      say(`A ${Math.round(clock.nanos / 1000)}`);
    }
    return;
  }
  if (fromHost.length || clock.nanos < serveUntil) {
    runSlice(50_000);
    await new Promise((res) => setImmediate(res));
  } else {
    await new Promise((res) => setTimeout(res, 1));
  }
}

async function main() {
  while (!quit) {
    if (DRIVEN && listening) {
      await runDriven();
      continue;
    }
    runSlice(200_000); // 200 us of emulated time, then serve the sockets and stdin
    if (usbReady && !listening) {
      listening = true;
      await new Promise((res) => server.listen(Number(args.port ?? 0), '127.0.0.1', res));
      event('listening');
      say(`READY ${server.address().port}`);
      if (nesOn && nextFrameAt === Infinity) nextFrameAt = clock.nanos + 1000;
    }
    if (!usbReady && clock.nanos > 2e9) {
      say('E error 0 0 USB did not enumerate within 2 s of emulated time');
      break;
    }
    if (!LOCKSTEP && framesDone >= MAX_FRAMES) break;
    if (clock.nanos > MAX_EMU_S * 1e9) break;
    await new Promise((res) => setImmediate(res));
  }
  const wall = (Date.now() - t0) / 1000;
  say(
    'DONE ' +
      JSON.stringify({
        uf2_blocks: uf2Blocks,
        frames: framesDone,
        emulated_s: clock.nanos / 1e9,
        wall_s: wall,
        cpu_mhz: CPU_MHZ,
        cycles,
        pio_steps: pioSteps,
        mcycles_per_wall_s: cycles / 1e6 / wall,
      }),
  );
  server.close();
  if (client) client.destroy();
  process.exit(0);
}
main();
