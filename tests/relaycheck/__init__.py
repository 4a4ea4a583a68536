"""The relay checker's room (net/relaycheck, `streamlab check-relay`): any relay held to the five rules.

A package (like tests/browser), so its modules import as `relaycheck.test_...`: no basename collides.
"""
