"""`python -m rwkvd`: the client commands (see rwkvd.cli)."""
from .cli import main

raise SystemExit(main())
