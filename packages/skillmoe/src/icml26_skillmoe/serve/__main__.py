"""``python -m icml26_skillmoe.serve``: the facade on uvicorn (``--help`` for the options)."""

from . import main

main()
