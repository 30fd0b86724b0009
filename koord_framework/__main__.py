"""``python -m koord_framework`` runs the ``koord`` command."""

import sys

from koord_framework.cli.main import main

sys.exit(main())
