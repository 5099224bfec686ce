// The Python-side holder of one game, shared by the binding files so that each can take an
// engine.Game argument directly (pybind11 matches the type across translation units).
#pragma once

#include "game.h"

namespace drm {

struct PyGame {
  State s;
};

}  // namespace drm
