"""The ``koord`` command line. ``main.py`` builds the parser from its table ``COMMANDS``: a new command
is a module and one line there."""
