"""The chaos proxy's room (core/chaos, net/chaos, `streamlab chaos`): its decisions and its sockets.

A package (like tests/browser), so its modules import as `chaos.test_...`: no basename collides.
"""
