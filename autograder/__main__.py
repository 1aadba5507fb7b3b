import sys

from autograder.entrypoints import command_line

sys.exit(command_line())
