"""Hostile rooms (issues 25 and 34): reproductions that cross the stand-in, the relay and the gateway at once.

A package (like tests/browser), so its modules import as `hostile.test_...`: no basename collides.
"""
