"""The relay's room (core/relay, net/relay): the exchange machine, the engine, the server kit, lab 07's relay.

A package (like tests/browser), so its modules import as `relay.test_...`: no basename collides.
"""
