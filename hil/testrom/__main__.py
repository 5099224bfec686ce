"""``python -m hil.testrom [OUT_DIR]``: build the test ROM and print its path."""

import sys

from hil.testrom import main

sys.exit(main())
