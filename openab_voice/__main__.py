import sys

from openab_voice.cli import main

sys.exit(main())
