"""ultimate_jobs' own benchmark (``make bench`` -> ``python bench/run.py``); see ``bench/run.py``."""
