"""The ``koord`` command line. ``main.py`` builds the parser from the modules named in ``COMMAND_MODULES``."""
