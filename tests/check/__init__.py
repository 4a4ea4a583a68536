"""The endpoint checker's room (core/conformance, net/check): every check, and the wire rules it shares.

A package (like tests/browser), so its modules import as `check.test_...`: no basename collides.
"""
