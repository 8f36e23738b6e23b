"""Studies: runs that depend on one another (``study``) and the claims a study tests
(``claims``). They use ``run`` and ``boards``; only ``bench/cli.py`` imports them."""
