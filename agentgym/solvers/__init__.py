"""Oracle solvers: exact planners the environments' ``oracle_actions`` and the tests rely on.

Each module is named for the game it solves (``frozen_lake.py``, ``countdown.py``, ...) and imports
neither numpy's global random state nor any environment class, so it can be used on its own.
"""
