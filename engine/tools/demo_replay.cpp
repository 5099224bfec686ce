// Standalone entry point: replays the attract-mode demo (init_demo + step) and prints, per frame,
// the pill row/column/rotation and field changes as JSON lines, then the throughput of the engine
// on stderr. Usage: demo_replay [frames] [frame_counter] [input_lead]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../src/game.h"

int main(int argc, char** argv) {
  const int frames = argc > 1 ? std::atoi(argv[1]) : 5700;
  const int fc = argc > 2 ? std::atoi(argv[2]) : 0;
  const int lead = argc > 3 ? std::atoi(argv[3]) : 0;
  drm::State s;
  drm::init_demo(s, static_cast<uint8_t>(fc), lead);
  for (int f = 1; f <= frames; ++f) {
    drm::State prev = s;
    drm::step(s, 0);
    std::printf("{\"f\":%d", f);
    if (s.pill_y != prev.pill_y) std::printf(",\"pr\":%d", s.pill_y);
    if (s.pill_x != prev.pill_x) std::printf(",\"pc\":%d", s.pill_x);
    if (s.pill_rotation != prev.pill_rotation) std::printf(",\"po\":%d", s.pill_rotation);
    bool any = false;
    for (int i = 0; i < drm::kFieldSize; ++i) {
      if (s.field[i] != prev.field[i]) {
        std::printf(any ? ",[%d,%d,%d]" : ",\"bc\":[[%d,%d,%d]", i, prev.field[i], s.field[i]);
        any = true;
      }
    }
    if (any) std::printf("]");
    if (s.virus_left != prev.virus_left) std::printf(",\"vc\":%d", prev.virus_left - s.virus_left);
    std::printf(",\"ph\":%d}\n", s.phase);
  }
  // Throughput: the demo replayed from the start, many times.
  const int reps = 2000;
  auto t0 = std::chrono::steady_clock::now();
  long total = 0;
  for (int r = 0; r < reps; ++r) {
    drm::init_demo(s, static_cast<uint8_t>(fc), lead);
    for (int f = 0; f < frames; ++f) drm::step(s, 0);
    total += frames;
  }
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "{\"frames\": %ld, \"fps\": %.0f}\n", total, total / dt);
  return 0;
}
