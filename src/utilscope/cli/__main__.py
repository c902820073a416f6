import sys

from utilscope.cli import main

sys.exit(main())
