import sys

from ragline.cli import main

sys.exit(main())
