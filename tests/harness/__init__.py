"""The split harness's room (core/harness, net/harness): the broken parsers and the peer libraries.

A package (like tests/browser), so its modules import as `harness.test_...`: no basename collides.
"""
