from hostwire.cli import main

raise SystemExit(main())
