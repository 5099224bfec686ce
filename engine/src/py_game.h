// The Python-side holder of one game, shared by the binding files so that each can take an
// engine.Game argument directly (pybind11 matches the type across translation units).
#pragma once

#include "game.h"
#include "versus.h"

namespace drm {

struct PyGame {
  State s;
};

struct PyVersus {
  Versus v;
};

}  // namespace drm
