from ..clients.stream import main

raise SystemExit(main())
