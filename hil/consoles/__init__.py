"""The console kinds side by side, behind one interface (hil.consoles.base.Console): the
simulated console (sim), the user's ROM in an emulator (emu), the real rig: a capture card and
the controller's serial port (rig)."""
