"""The house itself: layers, structure, the public surface, README, dev.py, the wheel, Binder, the site.

A package (like tests/browser), so its modules import as `project.test_...`: no basename collides.
"""
