from autograder.cli import main
import sys

sys.exit(main())
