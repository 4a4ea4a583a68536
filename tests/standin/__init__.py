"""The stand-in's room (core/standin, net/standin): planner, server, room, door, dashboard, profiles, replay.

A package (like tests/browser), so its modules import as `standin.test_...`: no basename collides.
"""
