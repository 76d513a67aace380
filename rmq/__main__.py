from rmq.cli import main

raise SystemExit(main())
