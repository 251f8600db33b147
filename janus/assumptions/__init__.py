"""Assumptions: what a generated graph takes for granted, and how each is checked.

- ``sources``: typed sources, where a value is re-read before each call (argument, attribute,
  item, global, closure cell, default, a call over those);
- ``guards``: named guard kinds over sources, compiled into one ``prepare()`` per cache entry;
- ``checks``: the assumptions checked inside the graph (a ``JanusAssert`` each);
- ``specs``: the specialisation of each argument, from its observations and past failures.
"""
