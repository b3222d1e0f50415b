"""Recorded steps: whole plans run again, their static memory plan and the order for memory."""
