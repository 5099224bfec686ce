"""The closed loop, one stage per module: runtime (the loop and its stages), tracker (frame
clock and shadow state), observation (the readers; they make perception.observation.Observation),
replay (the same readers offline), recording (captures with their ground truth), view (the live
view), heuristic (the stand-in policy)."""
