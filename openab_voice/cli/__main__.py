"""``python -m openab_voice.cli``: the same as the ``openab-voice`` command."""

import sys

from openab_voice.cli import main

sys.exit(main())
